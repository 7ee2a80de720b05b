import { ENVIRONMENTS, type Environment } from '../../domain/environments';
import { conflict, notFound, validationFailed } from '../../http/errors';
import { newId } from '../../infra/ids';
import type { Queryable, Sql, TransactionSql } from '../../infra/postgres';
import { reducesExposure, type ChangeGate, type GatedWrite, type WritePermit } from '../change-requests/gate';
import { diffFields, type AuditActor, type AuditEntry, type AuditLog } from '../audit/writer';
import { resolveActors } from '../audit/actors';
import { assertCohortsExist, type TargetingWrite } from '../cohorts/references';
import type { FlagEventOutbox } from '../../lib/outbox/store';
import { FLAG_CONTENT_FIELDS, newFlagContent } from './schema';
import { FlagKeyTakenError, type FlagListFilter, type FlagPage, type FlagStore, type ListPosition, type NewFlag, type WrittenFlag } from './store';
import type {
  FlagChangeEvent,
  FlagChangeType,
  FlagContent,
  FlagCreateInput,
  FlagEventName,
  FlagPatch,
  FlagRecord,
  FlagRef,
  FlagTargetingRule,
  FlagTargetingRuleInput,
  NamedFlagVersion,
  InProcessCompatibility,
} from './types';
import { assertInProcessCompatible, withInProcessCompatibility, type CohortReader, type WrittenContent } from './in-process';
import { canonicalJson, flagContentProblems, flagKeyProblem } from './validation';

export interface FlagServiceDeps {
  sql: Sql;
  store: FlagStore;
  /** Where every change's audit entries go, in its transaction (AuditWriter). */
  audit: AuditLog;
  /** Where every change's events go, in its transaction (OutboxWriter; the relay publishes them). */
  outbox: FlagEventOutbox;
  /** Called after every committed change (the in-process relay polls at once). */
  afterCommit?: () => void;
  /** The cohorts in_cohort conditions name: what in-process compatibility reads (docs/flagd.md#compatibility). */
  cohorts: CohortReader;
  /** The change policy every write passes first (docs/change-requests.md#the-gate). */
  gate: Pick<ChangeGate, 'admit' | 'notifyBypass'>;
}

/** Extra audit metadata a caller wants recorded with the change (trigger, guardrail verdict …). */
export interface FlagWriteOptions {
  metadata?: Record<string, unknown>;
  /** Why the write may pass a protected environment (docs/change-requests.md#the-gate). */
  permit?: WritePermit;
}

export interface EnabledChange {
  key: string;
  enabled: boolean;
}

/** One change of one flag, as the write path records it. */
type FlagChange =
  | { kind: 'create'; flag: NewFlag }
  | { kind: 'update' | 'toggle' | 'rollback'; before: FlagRecord; content: FlagContent }
  | { kind: 'delete'; before: FlagRecord };
type ChangeKind = FlagChange['kind'];

/** What each kind of change is called in the audit log, the version history and on the bus. */
const RECORDED_AS: Record<ChangeKind, { action: 'flag.create' | 'flag.update' | 'flag.toggle' | 'flag.delete'; changeType: FlagChangeType; event: FlagEventName }> = {
  create: { action: 'flag.create', changeType: 'create', event: 'flag.created' },
  update: { action: 'flag.update', changeType: 'update', event: 'flag.updated' },
  toggle: { action: 'flag.toggle', changeType: 'toggle', event: 'flag.toggled' },
  rollback: { action: 'flag.update', changeType: 'rollback', event: 'flag.updated' },
  delete: { action: 'flag.delete', changeType: 'delete', event: 'flag.deleted' },
};

/**
 * The one mutation path for flags: API routes, bulk, import, triggers, rollback, canary steps and
 * demo writes all call it, and every method ends in `write`: one transaction that writes the
 * flag rows, version snapshots, audit entries and outbox events of all its changes, set-based
 * (one statement per table, for one flag or thousands). Nothing else happens inside it.
 * Authorization is the caller's job (routes declare it).
 */
export class FlagService {
  constructor(private readonly deps: FlagServiceDeps) {}

  get(ref: FlagRef): Promise<FlagRecord | null> {
    return this.deps.store.find(this.deps.sql, ref);
  }

  /** The flags as the API answers them, with their in-process compatibility (docs/flagd.md#compatibility). */
  respond<T extends FlagRecord>(flags: readonly T[]): Promise<(T & InProcessCompatibility)[]> {
    return withInProcessCompatibility(this.deps.sql, this.deps.cohorts, flags);
  }

  /** The owning project of a service, or null when the service does not exist. */
  findService(serviceId: string) {
    return this.deps.store.findService(this.deps.sql, serviceId);
  }

  /** `reader`: where to read (a route's replica reader, docs/operations.md#read-replica); the primary by default. */
  list(filter: FlagListFilter, page: { limit: number; offset: number; after?: ListPosition; before?: ListPosition }, reader: Queryable = this.deps.sql): Promise<FlagPage> {
    return this.deps.store.list(reader, filter, page);
  }

  /** Every flag of the service (in one environment when given), in list order. */
  listByService(serviceId: string, environment?: Environment): Promise<FlagRecord[]> {
    return this.deps.store.listByService(this.deps.sql, serviceId, environment);
  }

  async history(ref: FlagRef, limit: number, offset: number, reader: Queryable = this.deps.sql): Promise<{ versions: NamedFlagVersion[]; total: number }> {
    const flag = await this.requireFlag(ref, reader);
    const page = await this.deps.store.listVersions(reader, flag.id, limit, offset);
    const named = await resolveActors(reader, page.versions);
    return { versions: page.versions.map((v) => ({ ...v, actorDisplay: named(v.actor, v.userId) })), total: page.total };
  }

  /**
   * Creates the flag in `input.environment`, or in every environment when none is given
   * (docs/api-reference.md#flags). Without an environment only the development copy takes the given
   * `enabled`; staging and production always start disabled. Returns the created copies in
   * ENVIRONMENTS order. 409 when the key exists in any of them (nothing is created).
   */
  async create(actor: AuditActor, input: FlagCreateInput, opts: FlagWriteOptions = {}): Promise<FlagRecord[]> {
    const keyProblem = flagKeyProblem(input.key);
    if (keyProblem) throw validationFailed([{ path: 'key', message: keyProblem }]);
    const service = await this.deps.store.findService(this.deps.sql, input.serviceId);
    if (!service) throw notFound('Service');
    if (input.projectId !== undefined && input.projectId !== service.projectId) {
      throw validationFailed([{ path: 'projectId', message: 'the service belongs to another project' }]);
    }
    const given = newFlagContent(input);
    const content: FlagContent = { ...given, tags: uniqueTags(given.tags), targeting: withRuleIds(given.targeting) };
    assertValid(content);
    const environments: Environment[] = input.environment ? [input.environment] : [...ENVIRONMENTS];

    let created: FlagRecord[];
    const bypassed: GatedWrite[] = [];
    try {
      const changes: FlagChange[] = environments.map((environment) => ({
        kind: 'create',
        flag: {
          ...content,
          enabled: input.environment || environment === 'development' ? content.enabled : false,
          id: newId('flg'),
          projectId: service.projectId,
          serviceId: service.id,
          environment,
          key: input.key,
        },
      }));
      created = await this.deps.sql.begin(async (tx) => (await this.write(tx, actor, changes, opts, bypassed)).map((w) => w.flag));
    } catch (error) {
      if (error instanceof FlagKeyTakenError) {
        throw conflict(`A flag with key "${input.key}" already exists in ${input.environment ? `the ${input.environment} environment of ` : ''}this service`);
      }
      throw error;
    }
    this.committed(actor, bypassed);
    return created;
  }

  /** Changes only the given fields. No-op patches (nothing differs) write nothing and return the flag. */
  update(actor: AuditActor, ref: FlagRef, patch: FlagPatch, expectedVersion?: number, opts: FlagWriteOptions = {}): Promise<FlagRecord> {
    const changes = pickContent(patch);
    return this.mutate(actor, ref, 'update', expectedVersion, opts, (current) => ({
      ...contentOf(current),
      ...changes,
      ...(changes.tags ? { tags: uniqueTags(changes.tags) } : {}),
      ...(changes.targeting ? { targeting: withRuleIds(changes.targeting) } : {}),
    }));
  }

  /** Flips `enabled`, or sets it to `enabled` when given (docs/api-reference.md#flags). */
  toggle(actor: AuditActor, ref: FlagRef, enabled?: boolean, expectedVersion?: number, opts: FlagWriteOptions = {}): Promise<FlagRecord> {
    return this.mutate(actor, ref, 'toggle', expectedVersion, opts, (current) => ({
      ...contentOf(current),
      enabled: enabled ?? !current.enabled,
    }));
  }

  /** Restores the content of `version` as a new version (audited as flag.update with metadata.rollbackTo). */
  /** `expectedVersion`: roll back only if the flag is still at this version (409 otherwise), e.g. the version a judgement was about. */
  async rollback(actor: AuditActor, ref: FlagRef, version: number, opts: FlagWriteOptions & { expectedVersion?: number } = {}): Promise<FlagRecord> {
    return this.mutate(actor, ref, 'rollback', opts.expectedVersion, { permit: opts.permit, metadata: { ...opts.metadata, rollbackTo: version } }, async (current, tx) => {
      const target = await this.deps.store.findVersion(tx, current.id, version);
      if (!target) throw notFound(`Version ${version} of flag "${ref.key}"`);
      return contentOf(target.snapshot);
    });
  }

  /**
   * Sets `enabled` on many flags of one service and environment in ONE transaction (public demo
   * grid writes): the rows are locked in id order and each changed flag gets its version
   * snapshot, flag.toggle audit entry and flag.toggled outbox event, written in key order. Flags
   * already in the wanted state are not written; a key given twice takes its last value.
   * Returns the existing flags by key, after the write.
   */
  async setEnabledMany(
    actor: AuditActor,
    target: { serviceId: string; environment: Environment },
    changes: EnabledChange[],
    opts: FlagWriteOptions = {},
  ): Promise<Map<string, FlagRecord>> {
    const wanted = new Map(changes.map((c) => [c.key, c.enabled]));
    if (!wanted.size) return new Map();
    const bypassed: GatedWrite[] = [];
    const result = await this.deps.sql.begin(async (tx) => {
      const current = await this.deps.store.lockMany(tx, target, [...wanted.keys()]);
      const flags = new Map(current.map((f) => [f.key, f]));
      const toggles: FlagChange[] = current
        .filter((f) => f.enabled !== wanted.get(f.key))
        .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
        .map((f) => ({ kind: 'toggle', before: f, content: { ...contentOf(f), enabled: wanted.get(f.key)! } }));
      const written = await this.write(tx, actor, toggles, opts, bypassed);
      for (const { flag } of written) flags.set(flag.key, flag);
      return { flags, changed: written.length };
    });
    if (result.changed > 0) this.committed(actor, bypassed);
    return result.flags;
  }

  async remove(actor: AuditActor, ref: FlagRef, expectedVersion?: number, opts: FlagWriteOptions = {}): Promise<void> {
    const bypassed: GatedWrite[] = [];
    await this.deps.sql.begin(async (tx) => {
      const current = await this.lockForWrite(tx, ref, expectedVersion);
      await this.write(tx, actor, [{ kind: 'delete', before: current }], opts, bypassed);
    });
    this.committed(actor, bypassed);
  }

  /**
   * What a change set would do (docs/change-requests.md): each change's flag as it is now and its
   * content after the change, validated as the direct route validates it (400 naming
   * `changes.<i>`). Writes nothing. A change whose flag is missing (or, for a create, present)
   * is reported through `current`; the caller decides whether that is a conflict.
   */
  async plan(changes: readonly PlannedChange[], db: Queryable = this.deps.sql): Promise<PlannedOutcome[]> {
    const current = await this.currentOf(db, changes, false);
    return changes.map((change, i) => planOne(change, current.get(refKey(change.ref)) ?? null, i));
  }

  /** The current version of each referenced flag (null: absent), in the order given. */
  async versionsOf(refs: readonly FlagRef[]): Promise<(number | null)[]> {
    const current = await this.currentOf(this.deps.sql, refs.map((ref) => ({ ref })), false);
    return refs.map((ref) => current.get(refKey(ref))?.version ?? null);
  }

  /**
   * Applies a change set atomically with the `change-request` permit (docs/change-requests.md#apply):
   * the flags are locked, and when any flag's version moved past its change's base version (or a
   * flag to create exists, or one to change is gone) nothing is written and the conflicts are
   * returned. Otherwise every change is written in one transaction, with `before` run first in it
   * and `within` after the writes (the request's own lock and status change commit with the flags).
   */
  async applyChangeSet(
    actor: AuditActor,
    changes: readonly PlannedChange[],
    opts: FlagWriteOptions & { before?: (tx: TransactionSql) => Promise<void>; within?: (tx: TransactionSql, written: FlagRecord[]) => Promise<void> },
  ): Promise<{ conflicts: ChangeConflict[]; written: FlagRecord[] }> {
    const bypassed: GatedWrite[] = [];
    const result = await this.deps.sql.begin(async (tx) => {
      await opts.before?.(tx);
      const current = await this.currentOf(tx, changes, true);
      const conflicts: ChangeConflict[] = [];
      const planned = changes.map((change, i) => {
        const flag = current.get(refKey(change.ref)) ?? null;
        if ((flag?.version ?? null) !== change.baseVersion) conflicts.push({ ref: change.ref, baseVersion: change.baseVersion, currentVersion: flag?.version ?? null });
        return planOne(change, flag, i);
      });
      if (conflicts.length) return { conflicts, written: [] };
      const projectOf = await this.projectsOfServices(tx, changes.map((c) => c.ref.serviceId));
      const writes: FlagChange[] = planned.flatMap((p): FlagChange[] => {
        if (!p.current) return [{ kind: 'create', flag: { ...p.after!, id: newId('flg'), projectId: projectOf.get(p.ref.serviceId)!, serviceId: p.ref.serviceId, environment: p.ref.environment, key: p.ref.key } }];
        if (!p.after) return [{ kind: 'delete', before: p.current }];
        if (canonicalJson(contentOf(p.current)) === canonicalJson(p.after)) return [];
        return [{ kind: p.action === 'toggle' ? 'toggle' : 'update', before: p.current, content: p.after }];
      });
      const written = (await this.write(tx, actor, writes, { metadata: opts.metadata, permit: 'change-request' }, bypassed)).map((w) => w.flag);
      await opts.within?.(tx, written);
      return { conflicts, written };
    });
    if (result.written.length) this.committed(actor, bypassed);
    return result;
  }

  /** The flags the changes name, by ref; locked in a stable order when `lock` (two change sets cannot deadlock). */
  private async currentOf(db: Queryable, changes: readonly Pick<PlannedChange, 'ref'>[], lock: boolean): Promise<Map<string, FlagRecord>> {
    const groups = new Map<string, { serviceId: string; environment: Environment; keys: string[] }>();
    for (const { ref } of changes) {
      const id = `${ref.serviceId}\u0000${ref.environment}`;
      const group = groups.get(id) ?? { serviceId: ref.serviceId, environment: ref.environment, keys: [] };
      group.keys.push(ref.key);
      groups.set(id, group);
    }
    const found = new Map<string, FlagRecord>();
    for (const id of [...groups.keys()].sort()) {
      const group = groups.get(id)!;
      const flags = lock ? await this.deps.store.lockMany(db as TransactionSql, group, group.keys) : await this.deps.store.findMany(db, group, group.keys);
      for (const flag of flags) found.set(refKey(flag), flag);
    }
    return found;
  }

  private async projectsOfServices(db: Queryable, serviceIds: string[]): Promise<Map<string, string>> {
    const projects = new Map<string, string>();
    for (const id of new Set(serviceIds)) {
      const service = await this.deps.store.findService(db, id);
      if (!service) throw notFound('Service');
      projects.set(id, service.projectId);
    }
    return projects;
  }

  private async mutate(
    actor: AuditActor,
    ref: FlagRef,
    kind: 'update' | 'toggle' | 'rollback',
    expectedVersion: number | undefined,
    opts: FlagWriteOptions,
    next: (current: FlagRecord, tx: TransactionSql) => FlagContent | Promise<FlagContent>,
  ): Promise<FlagRecord> {
    let wrote = false;
    const bypassed: GatedWrite[] = [];
    const result = await this.deps.sql.begin(async (tx) => {
      const current = await this.lockForWrite(tx, ref, expectedVersion);
      const content = await next(current, tx);
      assertValid(content);
      if (canonicalJson(contentOf(current)) === canonicalJson(content)) return current;
      const [written] = await this.write(tx, actor, [{ kind, before: current, content }], opts, bypassed);
      wrote = true;
      return written.flag;
    });
    if (wrote) this.committed(actor, bypassed);
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

  /**
   * The write path: the rows, version snapshots, audit entries and outbox events of `changes`,
   * in the caller's transaction (which holds the row locks), one statement per table whatever
   * their number. Audit entries and events follow the order of `changes`: a flag's events
   * reach the bus in that order. Returns the written flags in that order (a deleted one as it
   * was, at the version its deletion took).
   */
  private async write(tx: TransactionSql, actor: AuditActor, changes: FlagChange[], opts: FlagWriteOptions, bypassed: GatedWrite[]): Promise<WrittenFlag[]> {
    if (!changes.length) return [];
    const { store } = this.deps;
    // The change policy first: a refused write leaves nothing behind (docs/change-requests.md#the-gate).
    const gated = changes.map((c): GatedWrite => {
      const flag = c.kind === 'create' ? c.flag : c.before;
      const before = c.kind === 'create' ? null : contentOf(c.before);
      const after = c.kind === 'create' ? c.flag : c.kind === 'delete' ? null : c.content;
      return { projectId: flag.projectId, environment: flag.environment, flagKey: flag.key, reducing: reducesExposure(c.kind, before, after) };
    });
    const admittedAsBypass = new Set(await this.deps.gate.admit(tx, gated, opts.permit));
    bypassed.push(...admittedAsBypass);
    // Cohorts that in_cohort conditions newly name must be of the flag's project (400 otherwise).
    const targetingWrites = changes.flatMap((c): TargetingWrite[] => {
      if (c.kind === 'create') return [{ projectId: c.flag.projectId, targeting: c.flag.targeting, before: null }];
      if (c.kind === 'delete') return [];
      return [{ projectId: c.before.projectId, targeting: c.content.targeting, before: c.before.targeting }];
    });
    await assertCohortsExist(tx, targetingWrites);
    // Projects with requireInProcessCompatible refuse targeting flagd cannot evaluate exactly (400).
    await assertInProcessCompatible(
      tx,
      this.deps.cohorts,
      changes.flatMap((c): WrittenContent[] => {
        if (c.kind === 'create') return [{ after: { ...c.flag, version: 1 }, before: null }];
        if (c.kind === 'delete') return [];
        return [{ after: { ...c.content, key: c.before.key, projectId: c.before.projectId, version: c.before.version + 1 }, before: c.before }];
      }),
    );
    const inserted = await store.insertMany(tx, changes.flatMap((c) => (c.kind === 'create' ? [c.flag] : [])));
    const updated = await store.updateMany(
      tx,
      changes.flatMap((c) => (c.kind === 'create' || c.kind === 'delete' ? [] : [{ id: c.before.id, set: changedContent(c.before, c.content) }])),
    );
    const deleted = await store.deleteMany(tx, changes.flatMap((c) => (c.kind === 'delete' ? [c.before.id] : [])));

    const results: WrittenFlag[] = [];
    const versions: Parameters<FlagStore['insertVersions']>[2] = [];
    const entries: AuditEntry[] = [];
    const events: FlagChangeEvent[] = [];
    for (const [i, change] of changes.entries()) {
      const before = change.kind === 'create' ? null : change.before;
      let written: WrittenFlag;
      if (change.kind === 'create') written = inserted.get(change.flag.id)!;
      else if (change.kind === 'delete') written = { flag: { ...change.before, version: change.before.version + 1 }, changedAt: deleted.get(change.before.id)! };
      else written = updated.get(change.before.id)!;
      const { flag, changedAt } = written;
      const after = change.kind === 'delete' ? null : flag;
      const recorded = RECORDED_AS[change.kind];
      results.push(written);
      versions.push({ id: newId('fv'), snapshot: after ?? before!, version: flag.version, changeType: recorded.changeType });
      entries.push({
        projectId: flag.projectId,
        action: recorded.action,
        resourceType: 'flag',
        resourceId: flag.id,
        resourceName: flag.key,
        before,
        after,
        metadata: {
          serviceId: flag.serviceId,
          environment: flag.environment,
          version: flag.version,
          ...opts.metadata,
          ...(admittedAsBypass.has(gated[i]) ? { bypass: 'emergency-reduce' } : {}),
        },
      });
      const fieldChanges: FlagChangeEvent['data']['changes'] = {};
      for (const c of diffFields(before && contentOf(before), after && contentOf(after))) fieldChanges[c.field] = { from: c.oldValue, to: c.newValue };
      events.push({
        id: newId('evt'),
        event: recorded.event,
        timestamp: changedAt,
        data: { flagKey: flag.key, projectId: flag.projectId, serviceId: flag.serviceId, environment: flag.environment, changes: fieldChanges },
        flag: after,
        actor: actor.name,
        actorUserId: actor.userId,
      });
    }
    // Three independent inserts: postgres.js pipelines them on the transaction's connection.
    await Promise.all([store.insertVersions(tx, actor, versions), this.deps.audit.writeMany(tx, actor, entries), this.deps.outbox.enqueue(tx, events)]);
    return results;
  }

  private async requireFlag(ref: FlagRef, reader: Queryable = this.deps.sql): Promise<FlagRecord> {
    const flag = await this.deps.store.find(reader, ref);
    if (!flag) throw notFound(`Flag "${ref.key}"`);
    return flag;
  }

  private committed(actor: AuditActor, bypassed: readonly GatedWrite[]) {
    this.deps.afterCommit?.();
    this.deps.gate.notifyBypass(actor, bypassed);
  }
}

/** One change of a change set: the direct route's action and body against a base version (null: the flag must not exist). */
export interface PlannedChange {
  ref: FlagRef;
  action: 'create' | 'update' | 'toggle' | 'delete';
  body: Record<string, unknown>;
  baseVersion: number | null;
}

/** A planned change: its flag now (null: absent) and its content after the change (null: deleted). */
export interface PlannedOutcome {
  ref: FlagRef;
  action: PlannedChange['action'];
  current: FlagRecord | null;
  after: FlagContent | null;
}

export interface ChangeConflict {
  ref: FlagRef;
  baseVersion: number | null;
  currentVersion: number | null;
}

const refKey = (ref: FlagRef) => `${ref.serviceId}\u0000${ref.environment}\u0000${ref.key}`;

/**
 * The content a change leaves, computed as the direct routes compute it (create's defaults, update
 * over the current content, toggle flips or sets), validated; problems are named under
 * `changes.<i>.body`. A change that needs a flag which is absent, or a create of one that exists,
 * is planned against what it expected (the apply reports the conflict).
 */
function planOne(change: PlannedChange, current: FlagRecord | null, index: number): PlannedOutcome {
  const at = (problems: { path: string; message: string }[]) => validationFailed(problems.map((p) => ({ path: `changes.${index}.body.${p.path}`, message: p.message })));
  const { ref, action, body } = change;
  let after: FlagContent | null;
  if (action === 'create') {
    const given = newFlagContent({ ...(body as Omit<FlagCreateInput, 'key' | 'serviceId'>), key: ref.key, serviceId: ref.serviceId });
    after = { ...given, tags: uniqueTags(given.tags), targeting: withRuleIds(given.targeting) };
    return checked({ ref, action, current, after }, at);
  }
  if (!current) return { ref, action, current, after: null };
  if (action === 'delete') after = null;
  else if (action === 'toggle') after = { ...contentOf(current), enabled: typeof body.enabled === 'boolean' ? body.enabled : !current.enabled };
  else {
    const changes = pickContent(body as FlagPatch);
    after = {
      ...contentOf(current),
      ...changes,
      ...(changes.tags ? { tags: uniqueTags(changes.tags) } : {}),
      ...(changes.targeting ? { targeting: withRuleIds(changes.targeting) } : {}),
    };
  }
  return checked({ ref, action, current, after }, at);
}

function checked(outcome: PlannedOutcome, at: (problems: { path: string; message: string }[]) => Error): PlannedOutcome {
  if (outcome.after) {
    const problems = flagContentProblems(outcome.after, outcome.after.type);
    if (problems.length) throw at(problems);
  }
  return outcome;
}

function contentOf(flag: FlagRecord): FlagContent {
  const content = {} as Record<string, unknown>;
  for (const field of FLAG_CONTENT_FIELDS) content[field] = flag[field];
  return content as unknown as FlagContent;
}

/** The content fields whose value differs (what the row update writes; the rest stay as they are). */
function changedContent(before: FlagRecord, content: FlagContent): Partial<FlagContent> {
  const set: Record<string, unknown> = {};
  for (const field of FLAG_CONTENT_FIELDS) {
    const [was, is] = [before[field], content[field]];
    // Only objects need serializing to compare (10,000-flag batches: most fields are the same value or reference).
    const same = was === is || (isObject(was) && isObject(is) && canonicalJson(was) === canonicalJson(is));
    if (!same) set[field] = is;
  }
  return set as Partial<FlagContent>;
}

function pickContent(patch: FlagPatch): Partial<FlagContent> {
  const out: Record<string, unknown> = {};
  for (const field of FLAG_CONTENT_FIELDS) if (patch[field] !== undefined) out[field] = patch[field];
  return out as Partial<FlagContent>;
}

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

function assertValid(content: FlagContent) {
  const problems = flagContentProblems(content, content.type);
  if (problems.length) throw validationFailed(problems);
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
