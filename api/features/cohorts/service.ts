import { conflict, notFound } from '../../http/errors';
import { newId } from '../../infra/ids';
import type { Sql, TransactionSql } from '../../infra/postgres';
import { actorFromPrincipal, writeAudit, type AuditActor } from '../audit/writer';
import { cohortRuleMatched, compileCohort, type EvaluationContext } from '../evaluation/engine';
import { assertCohortInProcessCompatible } from '../flags/in-process';
import { canonicalJson } from '../flags/validation';
import { enqueueCohortEvent } from '../../lib/outbox/store';
import type { Caller } from '../projects/common';
import type { ChangeGate } from '../change-requests/gate';
import { CohortNameTakenError, type CohortStore, type CohortUser } from './store';
import { COHORT_LIMITS, type CohortChangeEvent, type CohortEventName, type CohortInput, type CohortPatch, type CohortRecord, type CohortRule, type CohortRuleInput } from './types';

export interface CohortServiceDeps {
  sql: Sql;
  store: CohortStore;
  /** Called after every committed change (the in-process outbox relay polls at once). */
  afterCommit?: () => void;
  /** New rules change what every flag naming the cohort serves: the change policy of their environments decides (docs/change-requests.md#the-gate). */
  gate: Pick<ChangeGate, 'admit'>;
}

/** Cohort evaluate's answer (docs/cohorts.md). */
export interface CohortMembershipAnswer {
  cohortId: string;
  userId: string;
  member: boolean;
  matchedRuleId: string | null;
}

const nameTaken = (name: string) => conflict(`A cohort named "${name}" already exists in this project`);

/**
 * Cohorts of a project (docs/cohorts.md). Every change is one transaction: the row, its audit entry
 * and a cohort event in the outbox, which the relay publishes to every replica's snapshots;
 * they recompile the flags that use the cohort. The routes check the project capability.
 */
export class CohortService {
  constructor(private readonly deps: CohortServiceDeps) {}

  list(projectId: string): Promise<CohortRecord[]> {
    return this.deps.store.list(this.deps.sql, projectId);
  }

  async get(projectId: string, id: string): Promise<CohortRecord> {
    const cohort = await this.deps.store.find(this.deps.sql, projectId, id);
    if (!cohort) throw notFound('Cohort');
    return cohort;
  }

  async create(caller: Caller, projectId: string, input: CohortInput): Promise<CohortRecord> {
    const { store, sql } = this.deps;
    const actor = actorFromPrincipal(caller.principal, caller);
    let created: CohortRecord;
    try {
      created = await sql.begin(async (tx) => {
        const count = await store.countForCreate(tx, projectId);
        if (count >= COHORT_LIMITS.cohortsPerProject) {
          throw conflict(`A project has at most ${COHORT_LIMITS.cohortsPerProject} cohorts; delete one first`);
        }
        const cohort = await store.insert(
          tx,
          { id: newId('coh'), projectId, name: input.name, description: input.description ?? '', rules: withRuleIds(input.rules ?? []) },
          actor,
        );
        await this.record(tx, actor, 'cohort.created', null, cohort);
        return cohort;
      });
    } catch (error) {
      if (error instanceof CohortNameTakenError) throw nameTaken(error.cohortName);
      throw error;
    }
    this.deps.afterCommit?.();
    return created;
  }

  /** Changes the given fields; a patch that changes nothing writes nothing. */
  async update(caller: Caller, projectId: string, id: string, patch: CohortPatch, expectedVersion?: number): Promise<CohortRecord> {
    const { store, sql } = this.deps;
    const actor = actorFromPrincipal(caller.principal, caller);
    let wrote = false;
    let result: CohortRecord;
    try {
      result = await sql.begin(async (tx) => {
        const before = await this.lockForWrite(tx, projectId, id, expectedVersion);
        const content = {
          name: patch.name ?? before.name,
          description: patch.description ?? before.description,
          rules: patch.rules ? withRuleIds(patch.rules) : before.rules,
        };
        if (canonicalJson(content) === canonicalJson({ name: before.name, description: before.description, rules: before.rules })) return before;
        if (canonicalJson(content.rules) !== canonicalJson(before.rules)) {
          const users = await store.flagsUsing(tx, projectId, id);
          await this.deps.gate.admit(tx, users.map((u) => ({ projectId, environment: u.environment, flagKey: u.key, reducing: false })));
        }
        await assertCohortInProcessCompatible(tx, store, projectId, { before, after: { id, rules: content.rules } });
        const after = await store.update(tx, id, content, actor);
        await this.record(tx, actor, 'cohort.updated', before, after);
        wrote = true;
        return after;
      });
    } catch (error) {
      if (error instanceof CohortNameTakenError) throw nameTaken(error.cohortName);
      throw error;
    }
    if (wrote) this.deps.afterCommit?.();
    return result;
  }

  /** Deletes a cohort no flag uses; one in use is a 409 naming the flags. */
  async remove(caller: Caller, projectId: string, id: string): Promise<void> {
    const { store, sql } = this.deps;
    const actor = actorFromPrincipal(caller.principal, caller);
    await sql.begin(async (tx) => {
      // Locked first: a flag write naming the cohort waits for the delete, or the delete for it (references.ts).
      const before = await this.lockForWrite(tx, projectId, id, undefined);
      const users: CohortUser[] = await store.flagsUsing(tx, projectId, id);
      if (users.length) {
        throw conflict(`Cohort "${before.name}" is used by the targeting of ${users.length} flag${users.length === 1 ? '' : 's'}; remove those conditions first`, { flags: users });
      }
      await store.delete(tx, id);
      await this.record(tx, actor, 'cohort.deleted', before, null);
    });
    this.deps.afterCommit?.();
  }

  /**
   * Whether a context is a member, with the first cohort rule that matched: the cohort as
   * stored now, compiled by the engine that compiles it into flags. `userId` is the targeting
   * key when the context has none.
   */
  async evaluate(projectId: string, id: string, userId: string, context: Record<string, unknown>): Promise<CohortMembershipAnswer> {
    const cohort = await this.get(projectId, id);
    const compiled = compileCohort(cohort);
    const key = context.targetingKey;
    const evaluated: EvaluationContext = typeof key === 'string' && key.length > 0 ? context : { ...context, targetingKey: userId };
    const index = cohortRuleMatched(compiled, evaluated, undefined);
    return { cohortId: cohort.id, userId, member: index >= 0, matchedRuleId: index >= 0 ? compiled.ruleIds[index] : null };
  }

  private async lockForWrite(tx: TransactionSql, projectId: string, id: string, expectedVersion: number | undefined): Promise<CohortRecord> {
    const current = await this.deps.store.find(tx, projectId, id, { forUpdate: true });
    if (!current) throw notFound('Cohort');
    if (expectedVersion !== undefined && expectedVersion !== current.version) {
      throw conflict(`Cohort "${current.name}" was changed meanwhile: you sent version ${expectedVersion}, the current version is ${current.version}`, {
        currentVersion: current.version,
      });
    }
    return current;
  }

  /** The audit entry and the outbox event of a change, in its transaction. */
  private async record(tx: TransactionSql, actor: AuditActor, event: CohortEventName, before: CohortRecord | null, after: CohortRecord | null): Promise<void> {
    const cohort = (after ?? before)!;
    const version = after ? after.version : cohort.version + 1;
    await writeAudit(tx, actor, {
      projectId: cohort.projectId,
      action: AUDIT_ACTION[event],
      resourceType: 'cohort',
      resourceId: cohort.id,
      resourceName: cohort.name,
      before,
      after,
      metadata: { version },
    });
    const change: CohortChangeEvent = {
      id: newId('evt'),
      event,
      timestamp: after?.updatedAt ?? new Date().toISOString(),
      projectId: cohort.projectId,
      cohortId: cohort.id,
      version,
      cohort: after,
      actor: actor.name,
      actorUserId: actor.userId,
    };
    await enqueueCohortEvent(tx, change);
  }
}

const AUDIT_ACTION: Record<CohortEventName, 'cohort.create' | 'cohort.update' | 'cohort.delete'> = {
  'cohort.created': 'cohort.create',
  'cohort.updated': 'cohort.update',
  'cohort.deleted': 'cohort.delete',
};

/** Rules written without an id get a generated one, so evaluate and explain can name the rule that matched. */
function withRuleIds(rules: CohortRuleInput[]): CohortRule[] {
  return rules.map((rule) => ({ id: rule.id ?? newId('crule'), conditions: rule.conditions }));
}
