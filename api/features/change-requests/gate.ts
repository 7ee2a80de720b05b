import type { MailMessage } from '../../../activities/mail';
import type { Environment } from '../../domain/environments';
import { forbidden, type HttpError } from '../../http/errors';
import { newId } from '../../infra/ids';
import type { Logger } from '../../infra/logger';
import type { Queryable, Sql, TransactionSql } from '../../infra/postgres';
import type { AuditActor } from '../audit/writer';
import type { FlagContent } from '../flags/types';
import { canonicalJson } from '../flags/validation';
import { ChangePolicyStore, isProtected } from './policy';

/**
 * Why a write may pass a protected environment without approval of its own
 * (docs/change-requests.md#the-gate):
 * - `change-request`: it is the apply of an approved change request;
 * - `release-safety`: a guardrail or canary rollback, or a step of a canary admitted under the
 *   policy; these always pass.
 */
export type WritePermit = 'change-request' | 'release-safety';

/** One flag write as the gate sees it. */
export interface GatedWrite {
  projectId: string;
  environment: Environment;
  flagKey: string;
  /** The change only reduces exposure (reducesExposure). */
  reducing: boolean;
}

export const APPROVAL_REQUIRED = 'APPROVAL_REQUIRED';

export function approvalRequired(projectId: string, environment: Environment, required: number, remedy = `open a change request (POST /api/projects/${projectId}/change-requests)`): HttpError {
  return forbidden(
    `changes to ${environment} need ${required} approval${required === 1 ? '' : 's'}: ${remedy}`,
    { code: APPROVAL_REQUIRED, environment },
  );
}

/**
 * Whether a flag change only reduces exposure (docs/change-requests.md#emergency-reduce): the flag
 * is switched off (its rules' percentages may go down with it), or rules only lose rollout percentage (same rules in the
 * same order, same conditions and values, no percentage raised, at least one lowered), or it is a
 * rollback to an earlier version. Creating or deleting a flag never is.
 */
export function reducesExposure(kind: 'create' | 'update' | 'toggle' | 'rollback' | 'delete', before: FlagContent | null, after: FlagContent | null): boolean {
  if (kind === 'rollback') return true;
  if (!before || !after) return false;
  const rest = (c: FlagContent) => canonicalJson({ ...c, enabled: undefined, targeting: c.targeting.map((r) => ({ ...r, rolloutPercentage: undefined })) });
  if (rest(before) !== rest(after)) return false;
  if (before.enabled && !after.enabled) return true;
  if (before.enabled !== after.enabled) return false;
  let lowered = false;
  for (const [i, rule] of after.targeting.entries()) {
    const was = before.targeting[i].rolloutPercentage ?? 100;
    const is = rule.rolloutPercentage ?? 100;
    if (is > was) return false;
    if (is < was) lowered = true;
  }
  return lowered;
}

/**
 * The one policy gate (docs/change-requests.md#the-gate): every path that changes what an
 * environment serves (the flag write path, cohort updates, canary starts) asks it inside its
 * transaction, before writing. A write to a protected environment is refused with 403
 * APPROVAL_REQUIRED unless it carries a permit, or only reduces exposure where the policy lets
 * that through (then it is a bypass: audited, and the approvers are mailed).
 */
export class ChangeGate {
  readonly policies = new ChangePolicyStore();

  constructor(private readonly deps: { sql: Sql; mail?: { send(message: MailMessage, idempotencyKey: string): Promise<void> }; logger: Logger }) {}

  /** Refuses (throws) or admits the writes; returns those admitted as emergency-reduce bypasses. */
  async admit(db: Queryable | TransactionSql, writes: readonly GatedWrite[], permit?: WritePermit): Promise<GatedWrite[]> {
    if (!writes.length || permit) return [];
    const policies = await this.policies.forProjects(db, writes.map((w) => w.projectId));
    const bypassed: GatedWrite[] = [];
    for (const write of writes) {
      const policy = policies.get(write.projectId)?.[write.environment];
      if (!isProtected(policy)) continue;
      if (write.reducing && policy.emergencyReduce === 'allow') bypassed.push(write);
      else throw approvalRequired(write.projectId, write.environment, policy.requiredApprovals);
    }
    return bypassed;
  }

  /**
   * A canary start (docs/change-requests.md#canaries): in a protected environment it needs an
   * approved (or scheduled, or applied) change request of the project that changes the same flag
   * there; its stages then write with the `release-safety` permit.
   */
  async admitCanary(db: Queryable | TransactionSql, target: { projectId: string; serviceId: string; environment: Environment; flagKey: string }, changeRequestId?: string): Promise<void> {
    const policy = (await this.policies.forProjects(db, [target.projectId])).get(target.projectId)?.[target.environment];
    if (!isProtected(policy)) return;
    if (changeRequestId) {
      const change = { serviceId: target.serviceId, environment: target.environment, flagKey: target.flagKey };
      const [approved] = await db<{ id: string }[]>`
        SELECT id FROM change_requests
        WHERE id = ${changeRequestId} AND project_id = ${target.projectId} AND status IN ('approved', 'scheduled', 'applied')
          AND changes @> ${db.json([change] as never)}`;
      if (approved) return;
    }
    throw approvalRequired(target.projectId, target.environment, policy.requiredApprovals, 'start the canary with the changeRequestId of an approved change request of this flag');
  }

  /**
   * Mails the approvers of each environment an emergency-reduce bypass touched, after its commit.
   * Best effort: the audit entry is the record; a mail that cannot be queued is logged.
   */
  notifyBypass(actor: AuditActor, bypassed: readonly GatedWrite[]): void {
    if (!bypassed.length || !this.deps.mail) return;
    void this.mailApprovers(actor, bypassed).catch((error) => this.deps.logger.error({ err: error }, 'could not mail the approvers of an emergency-reduce change'));
  }

  private async mailApprovers(actor: AuditActor, bypassed: readonly GatedWrite[]): Promise<void> {
    const { sql } = this.deps;
    const byEnvironment = new Map<string, GatedWrite[]>();
    for (const w of bypassed) byEnvironment.set(`${w.projectId}\u0000${w.environment}`, [...(byEnvironment.get(`${w.projectId}\u0000${w.environment}`) ?? []), w]);
    for (const writes of byEnvironment.values()) {
      const { projectId, environment } = writes[0];
      const policy = (await this.policies.forProjects(sql, [projectId])).get(projectId)?.[environment];
      if (!policy) continue;
      const approvers = await sql<{ id: string; email: string; project: string }[]>`
        SELECT u.id, u.email, p.name AS project FROM project_members m
        JOIN users u ON u.id = m.user_id JOIN projects p ON p.id = m.project_id
        WHERE m.project_id = ${projectId} AND m.role = ANY(${sql.array(policy.approverRoles)}::text[]) AND u.id IS DISTINCT FROM ${actor.userId}`;
      const notice = newId('byp');
      const flags = writes.map((w) => w.flagKey).join(', ');
      for (const approver of approvers) {
        await this.deps.mail!.send(
          {
            to: approver.email,
            subject: `[${approver.project}] emergency change in ${environment} without approval`,
            text: `${actor.name} reduced exposure of ${flags} in ${environment} of ${approver.project} without approval, as the change policy allows (emergency reduce). The audit log records it with bypass "emergency-reduce".`,
          },
          `change-bypass-${notice}-${approver.id}`,
        );
      }
    }
  }
}
