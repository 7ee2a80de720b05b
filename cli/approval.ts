import { APPROVAL_REQUIRED } from '../api/features/change-requests/gate';
import { CliError } from './errors';

/** A flag write the environment's change policy refused (docs/cli.md#change-requests): it needs a change request. */
export const isApprovalRequired = (error: unknown): error is CliError => error instanceof CliError && error.api?.code === APPROVAL_REQUIRED;

/** The refusal with the command that asks for the same change, `change` being the request's entry for it. */
export function withChangeRequestHint(error: CliError, projectId: string, change: { serviceId: string; environment: string; flagKey: string; action: string; body: unknown }): CliError {
  const title = `${change.action} ${change.flagKey} in ${change.environment}`;
  const hint = `open a change request and have it approved: flagship change-requests create --project ${projectId} --title '${title}' --change '${JSON.stringify(change)}'`;
  return new CliError(error.message, error.exitCode, error.api, hint);
}
