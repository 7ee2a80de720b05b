import { proxyActivities, sleep } from '@temporalio/workflow';
import { guardrailCheckAt, type GuardrailActivities, type GuardrailCheckResult, type GuardrailWatchInput } from './messages';

const { checkGuardrail } = proxyActivities<GuardrailActivities>({
  startToCloseTimeout: '2 minutes',
  // A warehouse outage delays the verdict; after 10 attempts (about 20 minutes) the watch fails
  // (visible in Temporal) rather than roll back long after anyone expects it.
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 10 },
});

/** A check held at `waiting` by a guard that could not be judged is repeated this often, this many times. */
export const GUARD_RECHECK_MS = 60_000;
export const GUARD_RECHECKS = 10;

/**
 * The watch after one production change (id `guardrail-<flagId>-v<version>`): a durable timer
 * until the change's after-window is complete, then the auto-rollback check on that version.
 * Workflow time (Date.now here) is Temporal's, so a watch started late (outbox backlog) judges
 * at once. A `waiting` verdict (a Prometheus guard could not be judged, docs/guardrails.md#prometheus-guards)
 * is never taken as a pass: the check runs again every minute, and after GUARD_RECHECKS the watch
 * ends `waiting`, its last check notifying the organization's alert channels.
 */
export async function guardrailWatch(input: GuardrailWatchInput): Promise<GuardrailCheckResult> {
  const waitMs = guardrailCheckAt(Date.parse(input.changedAt), input.windowMinutes) - Date.now();
  if (waitMs > 0) await sleep(waitMs);
  const check = { flagId: input.flagId, version: input.version, windowMinutes: input.windowMinutes };
  let result = await checkGuardrail(check);
  for (let recheck = 0; result.verdict === 'waiting' && recheck < GUARD_RECHECKS; recheck++) {
    await sleep(GUARD_RECHECK_MS);
    result = await checkGuardrail(recheck === GUARD_RECHECKS - 1 ? { ...check, lastCheck: true } : check);
  }
  return result;
}
