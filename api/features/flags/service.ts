import { badRequest, conflict, isUniqueViolation, notFound } from '../../http/errors';
import { newId } from '../../infra/ids';
import type { Sql, TransactionSql } from '../../infra/postgres';
import { diffFields, writeAudit, type AuditActor } from '../audit/writer';
import { enqueueFlagEvent } from '../outbox/store';
import { setEnabledInBatch, type EnabledChange } from './bulk-store';
import type { FlagListFilter, FlagPage, FlagStore, ListPosition, WrittenFlag } from './store';
import {
  ENVIRONMENTS,
  FLAG_CONTENT_FIELDS,
  type Environment,
  type FlagChangeEvent,
  type FlagChangeType,
  type FlagContent,
  type FlagCreateInput,
  type FlagEventName,
  type FlagPatch,
  type FlagRecord,
  type FlagRef,
  type FlagTargetingRule,
  type FlagTargetingRuleInput,
  type FlagVersionRecord,
} from './types';
import { flagContentProblems, flagKeyProblem, zeroValue } from './validation';

export interface FlagServiceDeps {
  sql: Sql;
  store: FlagStore;
  /** Called after every committed change (the in-process relay polls at once). */
  afterCommit?: () => void;
}

/** Extra audit metadata a caller wants recorded with the change (trigger, guardrail verdict …). */
export interface FlagWriteOptions {
  metadata?: Record<string, unknown>;
}

type Mutation = { changeType: FlagChangeType; auditAction: 'flag.update' | 'flag.toggle'; event: FlagEventName };

const UPDATE: Mutation = { changeType: 'update', auditAction: 'flag.update', event: 'flag.updated' };
const TOGGLE: Mutation = { changeType: 'toggle', auditAction: 'flag.toggle', event: 'flag.toggled' };
const ROLLBACK: Mutation = { changeType: 'rollback', auditAction: 'flag.update', event: 'flag.updated' };

/**
 * The one mutation path for flags: API routes, bulk, import, triggers, rollback, canary steps and
 * demo writes all call it. Each call is one transaction that writes the flag row, a version
 * snapshot, an audit entry and an outbox event; nothing else happens inside it. Authorization is
 * the caller's job (routes use ProjectAccess before calling).
 */
export class FlagService {
  constructor(private readonly deps: FlagServiceDeps) {}

  get(ref: FlagRef): Promise<FlagRecord | null> {
    return this.deps.store.find(ref);
  }

  /** The owning project of a service, or null when the service does not exist. */
  findService(serviceId: string) {
    return this.deps.store.findService(serviceId);
  }

  list(filter: FlagListFilter, page: { limit: number; offset: number; after?: ListPosition; before?: ListPosition }): Promise<FlagPage> {
    return this.deps.store.list(filter, page);
  }

  /** Every flag of the service (in one environment when given), in list order. */
  listByService(serviceId: string, environment?: Environment): Promise<FlagRecord[]> {
    return this.deps.store.listByService(serviceId, environment);
  }

  async history(ref: FlagRef, limit: number, offset: number): Promise<{ versions: FlagVersionRecord[]; total: number }> {
    const flag = await this.requireFlag(ref);
    return this.deps.store.listVersions(flag.id, limit, offset);
  }

  /**
   * Creates the flag in `input.environment`, or in every environment when none is given
   * (CONTRACT 3). Without an environment only the development copy takes the given `enabled`;
   * staging and production always start disabled. Returns the created copies in
   * ENVIRONMENTS order. 409 when the key exists in any of them (nothing is created).
   */
  async create(actor: AuditActor, input: FlagCreateInput, opts: FlagWriteOptions = {}): Promise<FlagRecord[]> {
    const keyProblem = flagKeyProblem(input.key);
    if (keyProblem) throw badRequest(`Validation failed: key: ${keyProblem}`, [{ path: 'key', message: keyProblem }]);
    const service = await this.deps.store.findService(input.serviceId);
    if (!service) throw notFound('Service');
    if (input.projectId !== undefined && input.projectId !== service.projectId) {
      throw badRequest('Validation failed: projectId: the service belongs to another project', [
        { path: 'projectId', message: 'the service belongs to another project' },
      ]);
    }
    const type = input.type ?? 'boolean';
    const content: FlagContent = {
      name: input.name ?? input.key,
      description: input.description ?? '',
      type,
      enabled: input.enabled ?? false,
      defaultValue: input.defaultValue === undefined ? zeroValue(type) : input.defaultValue,
      tags: uniqueTags(input.tags ?? []),
      variants: input.variants ?? [],
      targeting: withRuleIds(input.targeting ?? []),
      isPublic: input.isPublic ?? false,
    };
    assertValid(content);
    const environments: Environment[] = input.environment ? [input.environment] : [...ENVIRONMENTS];

    let created: FlagRecord[];
    try {
      created = await this.deps.sql.begin(async (tx) => {
        const flags: FlagRecord[] = [];
        for (const environment of environments) {
          const enabled = input.environment || environment === 'development' ? content.enabled : false;
          const written = await this.deps.store.insert(tx, {
            ...content,
            enabled,
            id: newId('flg'),
            projectId: service.projectId,
            serviceId: service.id,
            environment,
            key: input.key,
          });
          await this.record(tx, actor, { action: 'flag.create', changeType: 'create', event: 'flag.created' }, null, written, opts);
          flags.push(written.flag);
        }
        return flags;
      });
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw conflict(`A flag with key "${input.key}" already exists in ${input.environment ? `the ${input.environment} environment of ` : ''}this service`);
      }
      throw error;
    }
    this.committed();
    return created;
  }

  /** Changes only the given fields. No-op patches (nothing differs) write nothing and return the flag. */
  update(actor: AuditActor, ref: FlagRef, patch: FlagPatch, expectedVersion?: number, opts: FlagWriteOptions = {}): Promise<FlagRecord> {
    const changes = pickContent(patch);
    return this.mutate(actor, ref, UPDATE, expectedVersion, opts, (current) => ({
      ...contentOf(current),
      ...changes,
      ...(changes.tags ? { tags: uniqueTags(changes.tags) } : {}),
      ...(changes.targeting ? { targeting: withRuleIds(changes.targeting as FlagTargetingRuleInput[]) } : {}),
    }));
  }

  /** Flips `enabled`, or sets it to `enabled` when given (spec 3). */
  toggle(actor: AuditActor, ref: FlagRef, enabled?: boolean, expectedVersion?: number, opts: FlagWriteOptions = {}): Promise<FlagRecord> {
    return this.mutate(actor, ref, TOGGLE, expectedVersion, opts, (current) => ({
      ...contentOf(current),
      enabled: enabled ?? !current.enabled,
    }));
  }

  /** Restores the content of `version` as a new version (audited as flag.update with metadata.rollbackTo). */
  async rollback(actor: AuditActor, ref: FlagRef, version: number, opts: FlagWriteOptions = {}): Promise<FlagRecord> {
    return this.mutate(actor, ref, ROLLBACK, undefined, { metadata: { ...opts.metadata, rollbackTo: version } }, async (current, tx) => {
      const target = await this.deps.store.findVersion(tx, current.id, version);
      if (!target) throw notFound(`Version ${version} of flag "${ref.key}"`);
      return contentOf(target.snapshot);
    });
  }

  /**
   * Sets `enabled` on many flags of one service and environment in ONE transaction (public demo
   * grid writes): each changed flag still gets its version snapshot, flag.toggle audit entry and
   * outbox event (set-based, see bulk-store.ts). Returns the existing flags by key, after the write.
   */
  async setEnabledMany(
    actor: AuditActor,
    target: { serviceId: string; environment: Environment },
    changes: EnabledChange[],
    opts: FlagWriteOptions = {},
  ): Promise<Map<string, FlagRecord>> {
    const result = await this.deps.sql.begin((tx) => setEnabledInBatch(tx, actor, target, changes, opts.metadata));
    if (result.changed > 0) this.committed();
    return result.flags;
  }

  async remove(actor: AuditActor, ref: FlagRef, expectedVersion?: number, opts: FlagWriteOptions = {}): Promise<void> {
    await this.deps.sql.begin(async (tx) => {
      const current = await this.lockForWrite(tx, ref, expectedVersion);
      const deletedAt = await this.deps.store.delete(tx, current.id);
      const gone: WrittenFlag = { flag: { ...current, version: current.version + 1 }, changedAt: deletedAt };
      await this.record(tx, actor, { action: 'flag.delete', changeType: 'delete', event: 'flag.deleted' }, current, gone, opts, true);
    });
    this.committed();
  }

  private async mutate(
    actor: AuditActor,
    ref: FlagRef,
    mutation: Mutation,
    expectedVersion: number | undefined,
    opts: FlagWriteOptions,
    next: (current: FlagRecord, tx: TransactionSql) => FlagContent | Promise<FlagContent>,
  ): Promise<FlagRecord> {
    let wrote = false;
    const result = await this.deps.sql.begin(async (tx) => {
      const current = await this.lockForWrite(tx, ref, expectedVersion);
      const content = await next(current, tx);
      assertValid(content);
      if (canonicalJson(contentOf(current)) === canonicalJson(content)) return current;
      const written = await this.deps.store.update(tx, current.id, content);
      await this.record(tx, actor, { action: mutation.auditAction, changeType: mutation.changeType, event: mutation.event }, current, written, opts);
      wrote = true;
      return written.flag;
    });
    if (wrote) this.committed();
    return result;
  }

  private async lockForWrite(tx: TransactionSql, ref: FlagRef, expectedVersion: number | undefined): Promise<FlagRecord> {
    const current = await this.deps.store.lock(tx, ref);
    if (!current) throw notFound(`Flag "${ref.key}"`);
    if (expectedVersion !== undefined && expectedVersion !== current.version) {
      throw conflict(`Flag "${ref.key}" was changed meanwhile: you sent version ${expectedVersion}, the current version is ${current.version}`, {
        currentVersion: current.version,
      });
    }
    return current;
  }

  /** Version snapshot, audit entry and outbox event of one change, in the change's transaction. */
  private async record(
    tx: TransactionSql,
    actor: AuditActor,
    what: { action: 'flag.create' | 'flag.update' | 'flag.toggle' | 'flag.delete'; changeType: FlagChangeType; event: FlagEventName },
    before: FlagRecord | null,
    written: WrittenFlag,
    opts: FlagWriteOptions,
    deleted = false,
  ): Promise<void> {
    const after = deleted ? null : written.flag;
    const flag = written.flag;
    await this.deps.store.insertVersion(tx, {
      id: newId('fv'),
      flag: deleted ? before! : flag,
      version: flag.version,
      changeType: what.changeType,
      actor: actor.name,
      userId: actor.userId,
    });
    await writeAudit(tx, actor, {
      projectId: flag.projectId,
      action: what.action,
      resourceType: 'flag',
      resourceId: flag.id,
      resourceName: flag.key,
      before,
      after,
      metadata: { serviceId: flag.serviceId, environment: flag.environment, version: flag.version, ...opts.metadata },
    });
    const changes: FlagChangeEvent['data']['changes'] = {};
    for (const c of diffFields(before && contentOf(before), after && contentOf(after))) changes[c.field] = { from: c.oldValue, to: c.newValue };
    await enqueueFlagEvent(tx, {
      id: newId('evt'),
      event: what.event,
      timestamp: written.changedAt,
      data: { flagKey: flag.key, projectId: flag.projectId, serviceId: flag.serviceId, environment: flag.environment, changes },
      flag: after,
      actor: actor.name,
      actorUserId: actor.userId,
    });
  }

  private async requireFlag(ref: FlagRef): Promise<FlagRecord> {
    const flag = await this.deps.store.find(ref);
    if (!flag) throw notFound(`Flag "${ref.key}"`);
    return flag;
  }

  private committed() {
    this.deps.afterCommit?.();
  }
}

function contentOf(flag: FlagRecord): FlagContent {
  const content = {} as Record<string, unknown>;
  for (const field of FLAG_CONTENT_FIELDS) content[field] = flag[field];
  return content as unknown as FlagContent;
}

function pickContent(patch: FlagPatch): Partial<FlagContent> {
  const out: Record<string, unknown> = {};
  for (const field of FLAG_CONTENT_FIELDS) if (patch[field] !== undefined) out[field] = patch[field];
  return out as Partial<FlagContent>;
}

function assertValid(content: FlagContent) {
  const problems = flagContentProblems(content, content.type);
  if (problems.length) throw badRequest(`Validation failed: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`, problems);
}

/** JSON with object keys sorted: stored jsonb reorders keys, so plain JSON.stringify would see changes that are not. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

function uniqueTags(tags: string[]): string[] {
  return [...new Set(tags)];
}

/** Rules written without an id get a generated one, so history and explanations can name them. */
function withRuleIds(rules: FlagTargetingRuleInput[]): FlagTargetingRule[] {
  return rules.map((rule) => {
    const withId = { ...rule, id: rule.id ?? newId('rule') };
    if (withId.rolloutPercentage === undefined) delete withId.rolloutPercentage;
    return withId;
  });
}
