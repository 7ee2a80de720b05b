import type { MailMessage } from '../../../activities/mail';
import type { ProjectGrant } from '../../auth/access';
import { actingUser, type ProjectRole } from '../../auth/principal';
import { conflict, forbidden, notFound, validationFailed, type FieldProblem } from '../../http/errors';
import { newId } from '../../infra/ids';
import type { Logger } from '../../infra/logger';
import type { Sql, TransactionSql } from '../../infra/postgres';
import { enqueueChangeRequestEvent } from '../../lib/outbox/store';
import { actorFromPrincipal, writeAudit, type AuditActor } from '../audit/writer';
import type { FlagService, PlannedChange, PlannedOutcome } from '../flags/service';
import type { Caller } from '../projects/common';
import type { CandidateFlag } from '../simulate/service';
import { AUDIT_ACTION_OF, type ChangeRequestEventName } from './events';
import { isProtected, type ChangePolicyStore, type ProjectPolicy } from './policy';
import {
  APPROVER_ROLES,
  FINAL_STATUSES,
  type ApproverRole,
  type ChangePolicy,
  type ChangeRequest,
  type ChangeRequestCreate,
  type ChangeRequestPatch,
  type ChangeRequestStatus,
  type Conflict,
  type FlagChangeInput,
  type Impact,
  type StoredFlagChange,
} from './schema';
import type { ChangeRequestStore, ChangeRequestUpdate, StoredChangeRequest } from './store';

/** Recent contexts replayed per change for its impact; fewer per change in large requests, so one request replays at most IMPACT_BUDGET. */
const IMPACT_COHORT = 1_000;
const IMPACT_BUDGET = 100_000;
/** The furthest ahead a change may be scheduled. */
const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 3600 * 1000;

/** The durable timers of scheduled requests (the scheduledChange workflow, one per request). */
export interface ChangeSchedules {
  /** Arms (or re-arms) the request's timer for `at`. */
  set(requestId: string, at: string): Promise<void>;
  /** Stops the timer, if any (best effort: a timer that still fires finds nothing to apply). */
  clear(requestId: string): Promise<void>;
}

/** How many contexts a change would answer differently (SimulateService.impact); absent where no snapshots are loaded. */
export type ImpactOf = (ref: { serviceId: string; environment: StoredFlagChange['environment']; flagKey: string }, after: CandidateFlag | null, cohortSize: number) => Promise<{ changed: number; evaluated: number }>;

export interface ChangeRequestServiceDeps {
  sql: Sql;
  store: ChangeRequestStore;
  policies: ChangePolicyStore;
  flags: FlagService;
  schedules: ChangeSchedules;
  impact?: ImpactOf;
  mail?: { send(message: MailMessage, idempotencyKey: string): Promise<void> };
  logger: Logger;
}

/** What a request needs under the current policy of the environments it changes. */
interface Requirement {
  requiredApprovals: number;
  approverRoles: ApproverRole[];
  allowSelfApproval: boolean;
}

/** Who asks, with their role in the request's project (null: a project token). */
export interface RequestCaller extends Caller {
  grant: ProjectGrant;
}

const OPEN: ReadonlySet<ChangeRequestStatus> = new Set(['pending', 'approved', 'scheduled']);

/**
 * Change requests (docs/change-requests.md): several flag changes reviewed and applied as one.
 * Every step runs in a transaction that locks the request, writes its audit entry and queues its
 * webhook event; the apply itself is the flag write path's atomic change set
 * (FlagService.applyChangeSet) with the `change-request` permit.
 */
export class ChangeRequestService {
  constructor(private readonly deps: ChangeRequestServiceDeps) {}

  getPolicy(projectId: string): Promise<ChangePolicy> {
    return this.deps.policies.get(this.deps.sql, projectId);
  }

  async putPolicy(caller: Caller, projectId: string, policy: ChangePolicy): Promise<ChangePolicy> {
    const actor = actorFromPrincipal(caller.principal, caller);
    await this.deps.sql.begin(async (tx) => {
      const before = await this.deps.policies.get(tx, projectId);
      await this.deps.policies.put(tx, projectId, policy);
      await writeAudit(tx, actor, { projectId, action: 'change_policy.update', resourceType: 'project', resourceId: projectId, before, after: policy });
    });
    return this.getPolicy(projectId);
  }

  async create(caller: RequestCaller, input: ChangeRequestCreate): Promise<ChangeRequest> {
    const projectId = caller.grant.projectId;
    const actor = actorFromPrincipal(caller.principal, caller);
    const scheduledAt = checkSchedule(input.scheduledAt, 'scheduledAt');
    const { changes, impact } = await this.prepare(projectId, input.changes);
    const policy = await this.policyOf(projectId);
    const requirement = requirementOf(changes, policy);
    const created = await this.deps.sql.begin(async (tx) => {
      const record = await this.deps.store.insert(tx, {
        id: newId('cr'),
        projectId,
        status: requirement.requiredApprovals === 0 && scheduledAt ? 'scheduled' : 'pending',
        title: input.title,
        description: input.description ?? null,
        changes,
        impact,
        createdBy: actingUser(caller.principal)?.id ?? null,
        createdByName: actingUser(caller.principal)?.name || actor.name,
        scheduledAt,
      });
      await this.record(tx, actor, 'change_request.created', record, policy);
      if (scheduledAt) await this.deps.schedules.set(record.id, scheduledAt);
      return record;
    });
    return this.answer(created, caller, policy);
  }

  async list(caller: RequestCaller, status: ChangeRequestStatus | undefined, limit: number, offset: number): Promise<{ changeRequests: ChangeRequest[]; total: number }> {
    const { requests, total } = await this.deps.store.list(this.deps.sql, caller.grant.projectId, status, limit, offset);
    const policy = await this.policyOf(caller.grant.projectId);
    return { changeRequests: await Promise.all(requests.map((r) => this.answer(r, caller, policy))), total };
  }

  async get(caller: RequestCaller, id: string): Promise<ChangeRequest> {
    return this.answer(await this.find(caller.grant.projectId, id), caller);
  }

  /** The author's edit: every approval is void, the request waits for review again (docs/change-requests.md#review). */
  async update(caller: RequestCaller, id: string, patch: ChangeRequestPatch): Promise<ChangeRequest> {
    const projectId = caller.grant.projectId;
    const existing = await this.find(projectId, id);
    if (!isAuthor(caller, existing)) throw forbidden('only the author may edit a change request');
    const prepared = patch.changes ? await this.prepare(projectId, patch.changes) : undefined;
    const scheduledAt = patch.scheduledAt === undefined ? undefined : checkSchedule(patch.scheduledAt ?? undefined, 'scheduledAt');
    const policy = await this.policyOf(projectId);
    const actor = actorFromPrincipal(caller.principal, caller);
    const updated = await this.deps.sql.begin(async (tx) => {
      const current = await this.lockOpen(tx, projectId, id, 'edited');
      const changes = prepared?.changes ?? current.changes;
      const when = scheduledAt === undefined ? current.scheduledAt : scheduledAt;
      const requirement = requirementOf(changes, policy);
      const set: ChangeRequestUpdate = {
        title: patch.title,
        description: patch.description,
        changes: prepared?.changes,
        impact: prepared?.impact,
        scheduledAt: scheduledAt === undefined ? undefined : scheduledAt,
        approvals: [],
        status: requirement.requiredApprovals === 0 && when ? 'scheduled' : 'pending',
        newRevision: true,
      };
      const after = await this.deps.store.update(tx, id, set);
      await this.record(tx, actor, 'change_request.updated', after, policy, { voidedApprovals: current.approvals.length, before: summaryOf(current) });
      if (when && when !== current.scheduledAt) await this.deps.schedules.set(id, when);
      return { after, clearTimer: !when && current.scheduledAt !== null };
    });
    if (updated.clearTimer) await this.clearTimer(id);
    return this.answer(updated.after, caller, policy);
  }

  async approve(caller: RequestCaller, id: string, comment: string | undefined): Promise<ChangeRequest> {
    const projectId = caller.grant.projectId;
    const policy = await this.policyOf(projectId);
    const actor = actorFromPrincipal(caller.principal, caller);
    const approved = await this.deps.sql.begin(async (tx) => {
      const current = await this.lockOpen(tx, projectId, id, 'approved');
      if (current.status !== 'pending') throw conflict(`Change request ${id} is ${current.status}: there is nothing to approve`);
      const requirement = requirementOf(current.changes, policy);
      const reviewer = this.reviewer(caller, current, requirement, 'approve');
      if (current.approvals.some((a) => a.userId === reviewer.id)) throw conflict('You already approved this change request');
      const approvals = [...current.approvals, { userId: reviewer.id, name: reviewer.name, at: new Date().toISOString(), ...(comment ? { comment } : {}), revision: current.revision }];
      const enough = approvals.length >= requirement.requiredApprovals;
      const after = await this.deps.store.update(tx, id, { approvals, status: enough ? (current.scheduledAt ? 'scheduled' : 'approved') : 'pending' });
      await this.record(tx, actor, 'change_request.approved', after, policy, comment ? { comment } : {});
      return after;
    });
    return this.answer(approved, caller, policy);
  }

  async reject(caller: RequestCaller, id: string, comment: string): Promise<ChangeRequest> {
    const projectId = caller.grant.projectId;
    const policy = await this.policyOf(projectId);
    const actor = actorFromPrincipal(caller.principal, caller);
    const rejected = await this.deps.sql.begin(async (tx) => {
      const current = await this.lockOpen(tx, projectId, id, 'rejected');
      const reviewer = this.reviewer(caller, current, requirementOf(current.changes, policy), 'reject');
      const after = await this.deps.store.update(tx, id, { status: 'rejected', rejection: { userId: reviewer.id, name: reviewer.name, at: new Date().toISOString(), comment } });
      await this.record(tx, actor, 'change_request.rejected', after, policy, { comment });
      return after;
    });
    if (rejected.scheduledAt) await this.clearTimer(id);
    return this.answer(rejected, caller, policy);
  }

  async cancel(caller: RequestCaller, id: string): Promise<ChangeRequest> {
    const projectId = caller.grant.projectId;
    const existing = await this.find(projectId, id);
    if (!isAuthor(caller, existing) && !isAdmin(caller)) throw forbidden('only the author, an owner or an admin may cancel a change request');
    const actor = actorFromPrincipal(caller.principal, caller);
    const policy = await this.policyOf(projectId);
    const cancelled = await this.deps.sql.begin(async (tx) => {
      await this.lockOpen(tx, projectId, id, 'cancelled');
      const after = await this.deps.store.update(tx, id, { status: 'cancelled' });
      await this.record(tx, actor, 'change_request.cancelled', after, policy);
      return after;
    });
    if (cancelled.scheduledAt) await this.clearTimer(id);
    return this.answer(cancelled, caller, policy);
  }

  /** Applies now (docs/change-requests.md#apply): 409 CONFLICT, and the request failed, when a flag moved past its base version. */
  async apply(caller: RequestCaller, id: string): Promise<ChangeRequest> {
    const projectId = caller.grant.projectId;
    const existing = await this.find(projectId, id);
    const policy = await this.policyOf(projectId);
    const requirement = requirementOf(existing.changes, policy);
    if (!applicable(existing, requirement)) throw conflict(notApplicable(existing, requirement));
    const outcome = await this.applyNow(actorFromPrincipal(caller.principal, caller), existing, policy, (current) => {
      if (!applicable(current, requirement)) throw conflict(notApplicable(current, requirement));
    });
    if (existing.scheduledAt) await this.clearTimer(id);
    if (outcome.status === 'failed') {
      throw conflict(`Change request ${id} failed: ${outcome.failureReason}; nothing was applied`, { code: 'CONFLICT', changeRequest: await this.answer(outcome, caller, policy) });
    }
    return this.answer(outcome, caller, policy);
  }

  /**
   * The scheduled apply (the scheduledChange workflow's activity): applies the request only if it
   * is still scheduled for `at`; a request pending approval at its time fails. Idempotent: run
   * again, it finds the request applied (or failed) and does nothing.
   */
  async fire(id: string, at: string): Promise<'applied' | 'failed' | 'skipped'> {
    const request = await this.deps.store.findById(this.deps.sql, id);
    if (!request) return 'skipped';
    if (request.scheduledAt === null || Date.parse(request.scheduledAt) !== Date.parse(at)) return 'skipped';
    const policy = await this.policyOf(request.projectId);
    const actor: AuditActor = { name: `schedule:${id}`, userId: null };
    if (request.status === 'pending') {
      await this.fail(actor, request, policy, 'NOT_APPROVED: the scheduled time came before the approvals');
      return 'failed';
    }
    if (request.status !== 'scheduled') return 'skipped';
    const outcome = await this.applyNow(actor, request, policy, (current) => {
      if (current.status !== 'scheduled' || current.scheduledAt === null || Date.parse(current.scheduledAt) !== Date.parse(at)) throw new StepSkipped();
    }).catch((error: unknown) => {
      if (error instanceof StepSkipped) return null;
      throw error;
    });
    if (!outcome) return 'skipped';
    return outcome.status === 'applied' ? 'applied' : 'failed';
  }

  /**
   * The apply: the impact recomputed over the latest contexts, then the change set written with
   * the request marked applied in one transaction; on conflicts nothing is written and the request
   * is marked failed. `check` runs on the locked request first (its status may have moved).
   */
  private async applyNow(actor: AuditActor, request: StoredChangeRequest, policy: ProjectPolicy, check: (current: StoredChangeRequest) => void): Promise<StoredChangeRequest> {
    const planned = toPlanned(request.changes);
    // Changes that no longer plan (a flag gone) keep the impact measured last; the apply reports the conflict.
    const impact = await this.impactOf(await this.deps.flags.plan(planned).catch(() => null));
    let applied: StoredChangeRequest | undefined;
    const result = await this.deps.flags.applyChangeSet(actor, planned, {
      metadata: { changeRequestId: request.id },
      before: async (tx) => {
        const current = await this.deps.store.lock(tx, request.id);
        if (!current) throw notFound('Change request');
        check(current);
      },
      within: async (tx, written) => {
        applied = await this.deps.store.update(tx, request.id, { status: 'applied', applied: true, impact: impact ?? undefined });
        await this.record(tx, actor, 'change_request.applied', applied, policy, {
          approvals: applied.approvals,
          impact: applied.impact,
          flags: written.map((f) => ({ key: f.key, serviceId: f.serviceId, environment: f.environment, version: f.version })),
        });
      },
    });
    if (applied) return applied;
    const conflicts = result.conflicts.map((c) => `${c.ref.key} in ${c.ref.environment} (base version ${c.baseVersion ?? 'none'}, now ${c.currentVersion ?? 'absent'})`);
    return this.fail(actor, request, policy, `CONFLICT: flag moved since the request was made: ${conflicts.join('; ')}`);
  }

  private async fail(actor: AuditActor, request: StoredChangeRequest, policy: ProjectPolicy, reason: string): Promise<StoredChangeRequest> {
    const failed = await this.deps.sql.begin(async (tx) => {
      const current = await this.deps.store.lock(tx, request.id);
      if (!current || FINAL_STATUSES.has(current.status)) return current;
      const after = await this.deps.store.update(tx, request.id, { status: 'failed', failureReason: reason });
      await this.record(tx, actor, 'change_request.failed', after, policy, { reason });
      return after;
    });
    if (!failed) throw notFound('Change request');
    if (failed.status === 'failed') this.mailAuthor(failed);
    return failed;
  }

  /** Tells the author their request failed (best effort: the status, audit entry and webhook are the record). */
  private mailAuthor(request: StoredChangeRequest): void {
    if (!this.deps.mail || !request.createdBy) return;
    const mail = this.deps.mail;
    void (async () => {
      const [author] = await this.deps.sql<{ email: string }[]>`SELECT email FROM users WHERE id = ${request.createdBy}`;
      if (!author) return;
      await mail.send(
        { to: author.email, subject: `Change request "${request.title}" failed`, text: `Your change request "${request.title}" (${request.id}) was not applied: ${request.failureReason}. Nothing of it was applied.` },
        `change-request-failed-${request.id}`,
      );
    })().catch((error: unknown) => this.deps.logger.error({ err: error, changeRequestId: request.id }, 'could not mail the author of a failed change request'));
  }

  /**
   * Checks the changes against the project and the flags as they are now: services of the
   * project (404 otherwise), one change per flag, bodies valid as their direct routes take them
   * (400 naming `changes.<i>`), flags that exist (or, for a create, do not); then sets each base
   * version and measures the impact.
   */
  private async prepare(projectId: string, inputs: FlagChangeInput[]): Promise<{ changes: StoredFlagChange[]; impact: Impact[] }> {
    const problems: FieldProblem[] = [];
    const seen = new Set<string>();
    for (const [i, c] of inputs.entries()) {
      const key = `${c.serviceId}\u0000${c.environment}\u0000${c.flagKey}`;
      if (seen.has(key)) problems.push({ path: `changes.${i}`, message: `flag "${c.flagKey}" in ${c.environment} is changed twice in one request: make it one change` });
      seen.add(key);
    }
    if (problems.length) throw validationFailed(problems);
    for (const serviceId of new Set(inputs.map((c) => c.serviceId))) {
      const service = await this.deps.flags.findService(serviceId);
      if (!service || service.projectId !== projectId) throw notFound('Service');
    }
    const outcomes = await this.deps.flags.plan(inputs.map((c) => ({ ref: { serviceId: c.serviceId, environment: c.environment, key: c.flagKey }, action: c.action, body: c.body as Record<string, unknown>, baseVersion: c.baseVersion ?? null })));
    for (const [i, o] of outcomes.entries()) {
      if (o.action === 'create' && o.current) problems.push({ path: `changes.${i}.flagKey`, message: `flag "${o.ref.key}" already exists in ${o.ref.environment}` });
      if (o.action !== 'create' && !o.current) problems.push({ path: `changes.${i}.flagKey`, message: `flag "${o.ref.key}" does not exist in ${o.ref.environment}` });
    }
    if (problems.length) throw validationFailed(problems);
    const changes = inputs.map((c, i): StoredFlagChange => ({
      serviceId: c.serviceId,
      environment: c.environment,
      flagKey: c.flagKey,
      action: c.action,
      body: c.body as Record<string, unknown>,
      baseVersion: c.action === 'create' ? null : (c.baseVersion ?? outcomes[i].current!.version),
    }));
    return { changes, impact: (await this.impactOf(outcomes)) ?? [] };
  }

  /** Each change's impact over recent real contexts; null where this process has no snapshots to replay with. */
  private async impactOf(outcomes: PlannedOutcome[] | null): Promise<Impact[] | null> {
    const { impact } = this.deps;
    if (!impact || !outcomes) return null;
    const cohort = Math.max(50, Math.min(IMPACT_COHORT, Math.floor(IMPACT_BUDGET / Math.max(1, outcomes.length))));
    const measured: Impact[] = [];
    for (const o of outcomes) {
      const ref = { serviceId: o.ref.serviceId, environment: o.ref.environment, flagKey: o.ref.key };
      const after = o.after && o.current ? { enabled: o.after.enabled, defaultValue: o.after.defaultValue, variants: o.after.variants, targeting: o.after.targeting } : null;
      // A change whose replay failed (the warehouse away) has no entry rather than a made-up zero.
      const counted = await impact(ref, after, cohort).catch((error: unknown) => {
        this.deps.logger.warn({ err: error, ...ref }, 'could not measure the impact of a change');
        return null;
      });
      if (counted) measured.push({ ...ref, ...counted });
    }
    return measured;
  }

  private async find(projectId: string, id: string): Promise<StoredChangeRequest> {
    const found = await this.deps.store.find(this.deps.sql, projectId, id);
    if (!found) throw notFound('Change request');
    return found;
  }

  /** Locks the request of the project and checks it is still open (409 naming its status otherwise). */
  private async lockOpen(tx: TransactionSql, projectId: string, id: string, doing: string): Promise<StoredChangeRequest> {
    const current = await this.deps.store.lock(tx, id);
    if (!current || current.projectId !== projectId) throw notFound('Change request');
    if (!OPEN.has(current.status)) throw conflict(`Change request ${id} is ${current.status} and cannot be ${doing}`);
    return current;
  }

  /** The person who reviews, if the policy lets them (approvals are people, by role, not the author unless allowed). */
  private reviewer(caller: RequestCaller, request: StoredChangeRequest, requirement: Requirement, verb: 'approve' | 'reject'): { id: string; name: string } {
    const user = actingUser(caller.principal);
    if (!user) throw forbidden(`only people ${verb} change requests; a project API token cannot`);
    if (requirement.requiredApprovals === 0) throw conflict(`Change request ${request.id} needs no approval: apply it`);
    const role = caller.grant.role;
    if (!role || !(requirement.approverRoles as ProjectRole[]).includes(role)) {
      throw forbidden(`only ${requirement.approverRoles.join(' or ')} may ${verb} changes to ${environmentsOf(request.changes).join(', ')}`);
    }
    if (request.createdBy === user.id && !requirement.allowSelfApproval) throw forbidden(`you cannot ${verb} your own change request`);
    return { id: user.id, name: user.name || user.email };
  }

  private policyOf(projectId: string): Promise<ProjectPolicy> {
    return this.deps.policies.forProjects(this.deps.sql, [projectId]).then((p) => p.get(projectId) ?? {});
  }

  private async clearTimer(id: string): Promise<void> {
    await this.deps.schedules.clear(id).catch((error: unknown) => this.deps.logger.warn({ err: error, changeRequestId: id }, 'could not stop the timer of a change request; it will find nothing to apply'));
  }

  /** The step's audit entry and webhook event, in its transaction. */
  private async record(tx: TransactionSql, actor: AuditActor, event: ChangeRequestEventName, request: StoredChangeRequest, policy: ProjectPolicy, metadata: Record<string, unknown> = {}): Promise<void> {
    const summary = summaryOf(request, policy);
    await writeAudit(tx, actor, {
      projectId: request.projectId,
      action: AUDIT_ACTION_OF[event],
      resourceType: 'change_request',
      resourceId: request.id,
      resourceName: request.title,
      after: summary,
      metadata: { status: request.status, ...metadata },
    });
    await enqueueChangeRequestEvent(tx, { id: newId('evt'), event, timestamp: new Date().toISOString(), data: { projectId: request.projectId, changeRequestId: request.id, changeRequest: summary } });
  }

  /** The request as answered: stored fields, what the policy requires now, conflicts while open, and what the caller may do. */
  private async answer(request: StoredChangeRequest, caller: RequestCaller, policy?: ProjectPolicy): Promise<ChangeRequest> {
    const p = policy ?? (await this.policyOf(request.projectId));
    const requirement = requirementOf(request.changes, p);
    const conflicts = FINAL_STATUSES.has(request.status) ? [] : await this.conflictsOf(request.changes);
    const user = actingUser(caller.principal);
    const author = isAuthor(caller, request);
    const open = OPEN.has(request.status);
    const reviewer = user !== null && requirement.requiredApprovals > 0 && caller.grant.role !== null && (requirement.approverRoles as ProjectRole[]).includes(caller.grant.role) && (!author || requirement.allowSelfApproval);
    return {
      ...summaryOf(request, p),
      conflicts,
      actions: {
        edit: open && author,
        approve: request.status === 'pending' && reviewer && !request.approvals.some((a) => a.userId === user?.id),
        reject: open && reviewer,
        cancel: open && (author || isAdmin(caller)),
        apply: applicable(request, requirement),
      },
    };
  }

  private async conflictsOf(changes: StoredFlagChange[]): Promise<Conflict[]> {
    const versions = await this.deps.flags.versionsOf(toPlanned(changes).map((c) => c.ref));
    return changes.flatMap((c, i) =>
      versions[i] === c.baseVersion ? [] : [{ serviceId: c.serviceId, environment: c.environment, flagKey: c.flagKey, baseVersion: c.baseVersion, currentVersion: versions[i] }],
    );
  }
}

/** Thrown inside a scheduled apply's transaction when the request no longer wants this time. */
class StepSkipped extends Error {}

function toPlanned(changes: StoredFlagChange[]): PlannedChange[] {
  return changes.map((c) => ({ ref: { serviceId: c.serviceId, environment: c.environment, key: c.flagKey }, action: c.action, body: c.body, baseVersion: c.baseVersion }));
}

function environmentsOf(changes: StoredFlagChange[]) {
  return [...new Set(changes.map((c) => c.environment))];
}

/** The strictest of the protected environments a request changes: most approvals, roles every one allows, self-approval only if all allow it. */
function requirementOf(changes: StoredFlagChange[], policy: ProjectPolicy): Requirement {
  const protectedOnes = environmentsOf(changes).map((e) => policy[e]).filter(isProtected);
  if (!protectedOnes.length) return { requiredApprovals: 0, approverRoles: [], allowSelfApproval: true };
  return {
    requiredApprovals: Math.max(...protectedOnes.map((p) => p.requiredApprovals)),
    approverRoles: APPROVER_ROLES.filter((role) => protectedOnes.every((p) => p.approverRoles.includes(role))),
    allowSelfApproval: protectedOnes.every((p) => p.allowSelfApproval),
  };
}

function applicable(request: StoredChangeRequest, requirement: Requirement): boolean {
  if (request.status === 'pending') return requirement.requiredApprovals === 0;
  if (request.status === 'approved' || request.status === 'scheduled') return request.approvals.length >= requirement.requiredApprovals;
  return false;
}

function notApplicable(request: StoredChangeRequest, requirement: Requirement): string {
  if (FINAL_STATUSES.has(request.status)) return `Change request ${request.id} is ${request.status} and can never apply`;
  return `Change request ${request.id} has ${request.approvals.length} of ${requirement.requiredApprovals} approvals: it cannot apply yet`;
}

function isAuthor(caller: Caller, request: StoredChangeRequest): boolean {
  const user = actingUser(caller.principal);
  return user !== null && request.createdBy === user.id;
}

function isAdmin(caller: RequestCaller): boolean {
  return caller.grant.role === 'owner' || caller.grant.role === 'admin';
}

/** A future time within a year, as ISO UTC; undefined passes through (400 naming `path` otherwise). */
function checkSchedule(at: string | undefined, path: string): string | null {
  if (at === undefined) return null;
  const time = Date.parse(at);
  const now = Date.now();
  if (time <= now) throw validationFailed([{ path, message: 'must be in the future' }]);
  if (time - now > MAX_SCHEDULE_AHEAD_MS) throw validationFailed([{ path, message: 'must be within a year' }]);
  return new Date(time).toISOString();
}

/** The stored request as answered (without the caller's actions and live conflicts). */
function summaryOf(request: StoredChangeRequest, policy: ProjectPolicy = {}): Omit<ChangeRequest, 'conflicts' | 'actions'> {
  const requirement = requirementOf(request.changes, policy);
  return {
    id: request.id,
    projectId: request.projectId,
    status: request.status,
    title: request.title,
    description: request.description,
    changes: request.changes,
    approvals: request.approvals.map(({ revision: _revision, ...review }) => review),
    rejection: request.rejection,
    requiredApprovals: requirement.requiredApprovals,
    approverRoles: requirement.approverRoles,
    allowSelfApproval: requirement.allowSelfApproval,
    createdBy: request.createdBy,
    createdByName: request.createdByName,
    scheduledAt: request.scheduledAt,
    impact: request.impact,
    failureReason: request.failureReason,
    appliedAt: request.appliedAt,
    createdAt: request.createdAt,
    updatedAt: request.updatedAt,
  };
}
