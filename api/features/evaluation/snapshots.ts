import { hash } from 'node:crypto';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { COHORT_CHANGES_CHANNEL, type CohortChangeEvent, type CohortRecord } from '../cohorts/types';
import { ENVIRONMENTS, type Environment } from '../../domain/environments';
import { FLAG_CHANGES_CHANNEL, type FlagChangeEvent, type FlagRecord } from '../flags/types';
import { compileFlag, murmur3, type CompiledFlag, type FlagDefinition } from './engine/index';
import type { EvaluationStore, ServiceRow } from './store';

/** One flag as served: the API record (streams, bulk answers) and its compiled form (evaluation). */
export interface SnapshotFlag {
  readonly record: FlagRecord;
  readonly compiled: CompiledFlag;
  /** The flag's (id, version) and the version of every cohort it names: what the ETag sums. */
  readonly stamp: string;
}

/** A project's cohorts by id, shared by its services' snapshots and changed in place by cohort events. */
type ProjectCohorts = Map<string, CohortRecord>;
const NO_COHORTS: ReadonlyMap<string, CohortRecord> = new Map();

/** Who may see which flags of a snapshot: everything, or only `isPublic` flags. */
export type Visibility = 'all' | 'public';

/**
 * The flags of one (service, environment), compiled once per change against the project's
 * cohorts. Its fingerprint is an order-independent sum of per-flag hashes of (id, version) and,
 * for a flag with in_cohort conditions, the versions of the cohorts it names (a cohort change
 * can change its answers), so every replica holding the same flags and cohorts computes the
 * same ETag without coordination, and a change costs O(1).
 */
export class EnvironmentSnapshot {
  readonly flags = new Map<string, SnapshotFlag>();
  private all = { a: 0, b: 0, n: 0 };
  private pub = { a: 0, b: 0, n: 0 };
  /** What each visibility's callers read, derived on first use after a change. */
  private allView: VisibleView = {};
  private publicView: VisibleView = {};
  private lastModifiedText: { ms: number; text: string } | undefined;
  /** Values derived from the whole flag set (e.g. the flagd sync document), dropped on every change. */
  private derivedValues = new Map<DerivedKey<unknown>, unknown>();
  /** Time (ms) of the newest change applied here, from Postgres, so replicas that applied the same changes agree: OFREP's lastModified. */
  lastModified = 0;

  constructor(
    readonly serviceId: string,
    readonly environment: Environment,
    /** The project's cohorts, which this environment's flags compile against. */
    readonly cohorts: ReadonlyMap<string, CohortRecord> = NO_COHORTS,
  ) {}

  get(key: string): SnapshotFlag | undefined {
    return this.flags.get(key);
  }

  /** Compiles the flag against the project's cohorts as they are now (a cohort change calls it again). */
  set(record: FlagRecord): SnapshotFlag {
    this.remove(record.key);
    const compiled = compileFlag(record, this.cohorts);
    const entry: SnapshotFlag = { record, compiled, stamp: stampOf(record, compiled, this.cohorts) };
    this.flags.set(record.key, entry);
    this.account(entry, 1);
    this.modifiedAt(Date.parse(record.updatedAt));
    return entry;
  }

  remove(key: string): SnapshotFlag | undefined {
    const existing = this.flags.get(key);
    if (existing === undefined) return undefined;
    this.flags.delete(key);
    this.account(existing, -1);
    return existing;
  }

  /** Moves lastModified forward (a deletion carries its time on the event, not on a record). */
  modifiedAt(ms: number): void {
    if (ms > this.lastModified) this.lastModified = ms;
  }

  /** A weak validator of the visible flag set: changes whenever any visible flag changes. */
  etag(visibility: Visibility): string {
    const view = this.view(visibility);
    if (view.etag === undefined) {
      const f = visibility === 'all' ? this.all : this.pub;
      view.etag = `W/"${visibility === 'all' ? 'a' : 'p'}${hex(f.a)}${hex(f.b)}-${f.n}"`;
    }
    return view.etag;
  }

  /**
   * A bulk answer's validator for a context (its JSON) and channel window ('' for none): a hash of
   * the visible flags' ETag and the context, kept per view, so a client polling with the same
   * context is not hashed again until a flag changes. At most ANSWER_ETAGS_KEPT contexts per view.
   */
  answerEtag(visibility: Visibility, contextJson: string, window: string): string {
    const view = this.view(visibility);
    const etags = (view.answerEtags ??= new Map());
    const key = `${window}:${contextJson}`;
    let etag = etags.get(key);
    if (etag === undefined) {
      // One-shot: a new context per request (a user's first evaluation) pays one hash call.
      etag = `W/"${hash('sha1', `${this.etag(visibility)}${contextJson}${window === '' ? '' : `:${window}`}`, 'hex').slice(0, 24)}"`;
      if (etags.size >= ANSWER_ETAGS_KEPT) etags.clear();
      etags.set(key, etag);
    }
    return etag;
  }

  /** lastModified as an HTTP date (OFREP bulk's Last-Modified), built once per change. */
  lastModifiedHttpDate(): string {
    if (this.lastModifiedText?.ms !== this.lastModified) this.lastModifiedText = { ms: this.lastModified, text: new Date(this.lastModified).toUTCString() };
    return this.lastModifiedText.text;
  }

  /** The flags a caller with this visibility may see (every bulk answer reads it: kept until a change). */
  visible(visibility: Visibility): readonly SnapshotFlag[] {
    const view = this.view(visibility);
    view.flags ??= [...this.flags.values()].filter((entry) => visibility === 'all' || entry.record.isPublic);
    return view.flags;
  }

  /**
   * A value built from the whole flag set, built once per change and shared by every reader
   * (a cohort change that alters a flag is a change of that flag, so it drops these too).
   */
  derived<T>(key: DerivedKey<T>, build: (snapshot: EnvironmentSnapshot) => T): T {
    if (this.derivedValues.has(key)) return this.derivedValues.get(key) as T;
    const value = build(this);
    this.derivedValues.set(key, value);
    return value;
  }

  private view(visibility: Visibility): VisibleView {
    return visibility === 'all' ? this.allView : this.publicView;
  }

  private account(entry: SnapshotFlag, sign: 1 | -1) {
    this.allView = {};
    this.publicView = {};
    if (this.derivedValues.size > 0) this.derivedValues = new Map();
    const a = murmur3(entry.stamp, 1);
    const b = murmur3(entry.stamp, 2);
    this.all = { a: (this.all.a + sign * a) >>> 0, b: (this.all.b + sign * b) >>> 0, n: this.all.n + sign };
    if (entry.record.isPublic) this.pub = { a: (this.pub.a + sign * a) >>> 0, b: (this.pub.b + sign * b) >>> 0, n: this.pub.n + sign };
  }
}

/** Names one kind of value derived from a flag set (EnvironmentSnapshot.derived); compared by identity. */
export interface DerivedKey<T> {
  readonly description: string;
  /** Only carries T. */
  readonly _type?: T;
}

interface VisibleView {
  flags?: readonly SnapshotFlag[];
  etag?: string;
  answerEtags?: Map<string, string>;
}

/**
 * Few: a context polling again soon is found, while new contexts (a new user per request) pass
 * through within a few milliseconds instead of living long enough to be copied out of the young
 * generation.
 */
const ANSWER_ETAGS_KEPT = 64;

const hex = (n: number) => n.toString(16).padStart(8, '0');

/** `id:version`, then `|cohortId:version` per named cohort in id order (0: not known here). */
function stampOf(record: FlagRecord, compiled: CompiledFlag, cohorts: ReadonlyMap<string, CohortRecord>): string {
  let stamp = `${record.id}:${record.version}`;
  for (const id of compiled.cohortIds) stamp += `|${id}:${cohorts.get(id)?.version ?? 0}`;
  return stamp;
}

export class ServiceSnapshot {
  readonly environments: Record<Environment, EnvironmentSnapshot>;

  constructor(
    readonly id: string,
    readonly projectId: string,
    /** The project's cohorts, which its flags' in_cohort conditions compile against. */
    cohorts: ReadonlyMap<string, CohortRecord> = NO_COHORTS,
  ) {
    this.environments = {
      development: new EnvironmentSnapshot(id, 'development', cohorts),
      staging: new EnvironmentSnapshot(id, 'staging', cohorts),
      production: new EnvironmentSnapshot(id, 'production', cohorts),
    };
  }

  get flagCount(): number {
    return ENVIRONMENTS.reduce((n, env) => n + this.environments[env].flags.size, 0);
  }
}

/** What a snapshot change tells its listeners (streams): the event and the flag before it. */
export interface SnapshotChange {
  event: FlagChangeEvent;
  service: ServiceSnapshot;
  /** The flag as it was before the change, when this replica knew it. */
  previous: FlagRecord | undefined;
}

export interface SnapshotStats {
  services: number;
  flags: number;
  eventsApplied: number;
  eventsIgnored: number;
  lastEventAt: string | null;
  lastReconcileAt: string | null;
  ready: boolean;
}

const RECENT_EVENT_IDS = 20_000;
const UNKNOWN_SERVICE_TTL_MS = 2_000;

/**
 * Every replica's in-memory view of the flags table, per (service, environment).
 *
 * - Start: subscribe to the flag-change bus first, then load every service and flag in two
 *   queries; events that arrive during the load are applied after it (versions decide).
 * - Changes: each FlagChangeEvent from the outbox relay replaces (or removes) one compiled
 *   flag. Stale events (lower version of the same flag id) and duplicates are ignored.
 * - A service created after start is loaded on its first request (the only I/O on the read
 *   path, once per service and replica); unknown ids are remembered for 2 s so a flood of
 *   made-up ids cannot turn into a flood of queries.
 * - Cohorts: each project's cohorts are kept beside its services (loaded at start with the
 *   flags, then changed by CohortChangeEvents from the outbox relay on their own channel). A
 *   cohort change recompiles exactly the flags of that project that name it, which changes
 *   their environments' ETags, and tells the listeners (streams send `flag-update`, so clients
 *   refetch) with a change event derived from the cohort event.
 * - Safety net: every `reconcileIntervalMs` the tables' (id, version) stamps of flags and
 *   cohorts are compared with the snapshots, so a bus message lost during a Redis outage is
 *   repaired within that interval.
 */
export class SnapshotStore {
  private readonly services = new Map<string, ServiceSnapshot>();
  private readonly unknownUntil = new Map<string, number>();
  private readonly loading = new Map<string, { promise: Promise<ServiceSnapshot | null>; queued: FlagChangeEvent[] }>();
  private readonly listeners: ((change: SnapshotChange) => void)[] = [];
  private readonly recentIds = new Set<string>();
  /** Cohorts by project; a project's map is shared by its ServiceSnapshots. */
  private readonly cohorts = new Map<string, ProjectCohorts>();
  private startupQueue: FlagChangeEvent[] | null = [];
  private startupCohortQueue: CohortChangeEvent[] | null = [];
  private unsubscribers: (() => Promise<void>)[] = [];
  private reconcileTimer?: NodeJS.Timeout;
  /** Services, flag slots and cohorts the bus changed during the running reconcile pass. */
  private touchedDuringReconcile: Touched | null = null;
  private reconciling?: Promise<void>;
  private stats = { eventsApplied: 0, eventsIgnored: 0, lastEventAt: null as string | null, lastReconcileAt: null as string | null };

  constructor(
    private readonly deps: { sql: Sql; store: EvaluationStore; cache: Cache; logger: Logger; reconcileIntervalMs: number },
  ) {}

  async start(): Promise<void> {
    this.unsubscribers.push(await this.deps.cache.subscribe(FLAG_CHANGES_CHANNEL, (message) => this.onMessage(message)));
    this.unsubscribers.push(await this.deps.cache.subscribe(COHORT_CHANGES_CHANNEL, (message) => this.onCohortMessage(message)));
    await this.loadAll();
    const queuedCohorts = this.startupCohortQueue ?? [];
    this.startupCohortQueue = null;
    for (const event of queuedCohorts) this.applyCohort(event);
    const queued = this.startupQueue ?? [];
    this.startupQueue = null;
    for (const event of queued) this.apply(event);
    if (this.deps.reconcileIntervalMs > 0) {
      this.reconcileTimer = setInterval(() => void this.reconcile().catch((error) => {
        this.deps.logger.error({ err: error }, 'snapshot reconcile failed');
      }), this.deps.reconcileIntervalMs);
      this.reconcileTimer.unref();
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.reconcileTimer);
    await this.reconciling;
    for (const unsubscribe of this.unsubscribers.splice(0)) await unsubscribe();
  }

  onChange(listener: (change: SnapshotChange) => void): void {
    this.listeners.push(listener);
  }

  /** The snapshot of a known service, synchronously (the hot path). */
  get(serviceId: string): ServiceSnapshot | undefined {
    return this.services.get(serviceId);
  }

  /** The snapshot, loading a service this replica has not seen yet; null when it does not exist. */
  async resolve(serviceId: string): Promise<ServiceSnapshot | null> {
    const known = this.services.get(serviceId);
    if (known !== undefined) return known;
    const until = this.unknownUntil.get(serviceId);
    if (until !== undefined) {
      if (until > Date.now()) return null;
      this.unknownUntil.delete(serviceId);
    }
    const inFlight = this.loading.get(serviceId);
    if (inFlight) return inFlight.promise;
    const entry = { promise: this.loadService(serviceId), queued: [] as FlagChangeEvent[] };
    this.loading.set(serviceId, entry);
    try {
      return await entry.promise;
    } finally {
      this.loading.delete(serviceId);
    }
  }

  /**
   * Compiles a flag definition as this project's snapshots compile theirs, for callers that
   * evaluate a flag which is not (yet) stored: simulate's candidate.
   */
  compile(projectId: string, definition: FlagDefinition): CompiledFlag {
    return compileFlag(definition, this.cohorts.get(projectId) ?? NO_COHORTS);
  }

  snapshotStats(): SnapshotStats {
    let flags = 0;
    for (const s of this.services.values()) flags += s.flagCount;
    return { services: this.services.size, flags, ready: this.startupQueue === null, ...this.stats };
  }

  /** Applies one change event (from the bus, or synthesized by reconcile). */
  apply(event: FlagChangeEvent): void {
    if (this.startupQueue !== null) {
      this.startupQueue.push(event);
      return;
    }
    const loading = this.loading.get(event.data.serviceId);
    if (loading) {
      loading.queued.push(event);
      return;
    }
    if (this.recentIds.has(event.id)) {
      this.stats.eventsIgnored++;
      return;
    }
    this.remember(event.id);
    const { serviceId, projectId, environment, flagKey } = event.data;
    if (this.touchedDuringReconcile !== null && !event.id.startsWith(SYNTHETIC_PREFIX)) {
      this.touchedDuringReconcile.services.add(serviceId);
      this.touchedDuringReconcile.flags.add(flagSlot({ serviceId, environment, key: flagKey }));
    }
    if (!ENVIRONMENTS.includes(environment)) {
      this.stats.eventsIgnored++;
      return;
    }
    let service = this.services.get(serviceId);
    if (service === undefined) {
      service = new ServiceSnapshot(serviceId, projectId, this.cohortsOf(projectId));
      this.services.set(serviceId, service);
      this.unknownUntil.delete(serviceId);
    }
    const env = service.environments[environment];
    const current = env.get(flagKey);
    if (event.flag === null) {
      if (current === undefined) {
        this.stats.eventsIgnored++;
        return;
      }
      env.remove(flagKey);
      env.modifiedAt(Date.parse(event.timestamp));
    } else {
      // Same flag (id) at a higher version than this event: the event is late, skip it.
      if (current !== undefined && current.record.id === event.flag.id && current.record.version > event.flag.version) {
        this.stats.eventsIgnored++;
        return;
      }
      env.set(event.flag);
    }
    this.stats.eventsApplied++;
    this.stats.lastEventAt = new Date().toISOString();
    this.notify({ event, service, previous: current?.record });
  }

  /**
   * Applies one cohort change (from the bus, or synthesized by reconcile): keeps the higher
   * version, then recompiles the flags of the project that name the cohort.
   */
  applyCohort(event: CohortChangeEvent): void {
    if (this.startupCohortQueue !== null) {
      this.startupCohortQueue.push(event);
      return;
    }
    if (this.recentIds.has(event.id)) {
      this.stats.eventsIgnored++;
      return;
    }
    this.remember(event.id);
    if (this.touchedDuringReconcile !== null && !event.id.startsWith(SYNTHETIC_PREFIX)) this.touchedDuringReconcile.cohorts.add(event.cohortId);
    const cohorts = this.cohortsOf(event.projectId);
    const current = cohorts.get(event.cohortId);
    if ((current !== undefined && current.version >= event.version) || (current === undefined && event.cohort === null)) {
      this.stats.eventsIgnored++;
      return;
    }
    if (event.cohort === null) cohorts.delete(event.cohortId);
    else cohorts.set(event.cohortId, event.cohort);
    this.stats.eventsApplied++;
    this.stats.lastEventAt = new Date().toISOString();
    const changedAt = Date.parse(event.timestamp);
    for (const service of this.services.values()) {
      if (service.projectId !== event.projectId) continue;
      for (const environment of ENVIRONMENTS) {
        const env = service.environments[environment];
        for (const entry of [...env.flags.values()]) {
          if (!entry.compiled.cohortIds.includes(event.cohortId)) continue;
          env.set(entry.record);
          env.modifiedAt(changedAt);
          this.notify({ event: cohortFlagEvent(event, entry.record), service, previous: entry.record });
        }
      }
    }
  }

  private notify(change: SnapshotChange): void {
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch (error) {
        this.deps.logger.error({ err: error }, 'snapshot listener failed');
      }
    }
  }

  /** The project's cohort map, created empty on first use so its services can share it. */
  private cohortsOf(projectId: string): ProjectCohorts {
    let cohorts = this.cohorts.get(projectId);
    if (cohorts === undefined) {
      cohorts = new Map();
      this.cohorts.set(projectId, cohorts);
    }
    return cohorts;
  }

  /** Compares every flag's (id, version) with Postgres and repairs what differs. */
  reconcile(): Promise<void> {
    if (this.reconciling) return this.reconciling;
    this.reconciling = this.reconcileOnce().finally(() => {
      this.reconciling = undefined;
    });
    return this.reconciling;
  }

  private async reconcileOnce(): Promise<void> {
    // What the bus changes while the pass reads Postgres is newer than what it read: the pass
    // must neither delete nor rewind those (they are checked again on the next pass).
    const touched: Touched = { services: new Set(), flags: new Set(), cohorts: new Set() };
    this.touchedDuringReconcile = touched;
    try {
      await this.reconcileAgainst(touched);
    } finally {
      this.touchedDuringReconcile = null;
    }
    this.stats.lastReconcileAt = new Date().toISOString();
  }

  private async reconcileAgainst(touched: Touched): Promise<void> {
    // Cohorts first: flags repaired below then compile against the repaired cohorts.
    await this.reconcileCohorts(touched);
    const [stamps, services] = await Promise.all([this.deps.store.flagStamps(this.deps.sql), this.deps.store.allServices(this.deps.sql)]);
    const existingServices = new Set(services.map((s) => s.id));
    for (const id of [...this.services.keys()]) {
      if (!existingServices.has(id) && !this.loading.has(id) && !touched.services.has(id)) this.services.delete(id);
    }
    const seen = new Set<string>();
    const stale: string[] = [];
    for (const stamp of stamps) {
      const service = this.services.get(stamp.serviceId);
      if (service === undefined) continue; // loaded on first use
      seen.add(flagSlot(stamp));
      const current = service.environments[stamp.environment].get(stamp.key);
      if (current === undefined || current.record.id !== stamp.id || current.record.version !== stamp.version) stale.push(stamp.id);
    }
    for (const record of await this.deps.store.flagsByIds(this.deps.sql, stale)) {
      if (touched.flags.has(flagSlot(record))) continue;
      const current = this.services.get(record.serviceId)?.environments[record.environment].get(record.key)?.record;
      this.apply(syntheticEvent(record, current, record));
    }
    for (const service of this.services.values()) {
      for (const environment of ENVIRONMENTS) {
        for (const entry of [...service.environments[environment].flags.values()]) {
          const r = entry.record;
          const slot = flagSlot(r);
          if (!seen.has(slot) && !stale.includes(r.id) && !touched.flags.has(slot)) this.apply(syntheticEvent(r, r, null));
        }
      }
    }
  }

  private async reconcileCohorts(touched: Touched): Promise<void> {
    const stamps = await this.deps.store.cohortStamps(this.deps.sql);
    const stored = new Set<string>();
    const stale: string[] = [];
    for (const stamp of stamps) {
      stored.add(stamp.id);
      const current = this.cohorts.get(stamp.projectId)?.get(stamp.id);
      if (current === undefined || current.version < stamp.version) stale.push(stamp.id);
    }
    for (const cohort of await this.deps.store.cohortsByIds(this.deps.sql, stale)) {
      if (!touched.cohorts.has(cohort.id)) this.applyCohort(syntheticCohortEvent(cohort, cohort.version, cohort));
    }
    for (const cohorts of this.cohorts.values()) {
      for (const cohort of [...cohorts.values()]) {
        if (!stored.has(cohort.id) && !touched.cohorts.has(cohort.id)) this.applyCohort(syntheticCohortEvent(cohort, cohort.version + 1, null));
      }
    }
  }

  private onCohortMessage(message: string): void {
    let event: CohortChangeEvent;
    try {
      event = JSON.parse(message) as CohortChangeEvent;
    } catch {
      this.deps.logger.warn('ignoring a malformed cohort-change message');
      return;
    }
    if (!event || typeof event.id !== 'string' || typeof event.projectId !== 'string' || typeof event.cohortId !== 'string' || typeof event.version !== 'number') {
      this.deps.logger.warn('ignoring a cohort-change message without id, project, cohort or version');
      return;
    }
    this.applyCohort(event);
  }

  private onMessage(message: string): void {
    let event: FlagChangeEvent;
    try {
      event = JSON.parse(message) as FlagChangeEvent;
    } catch {
      this.deps.logger.warn('ignoring a malformed flag-change message');
      return;
    }
    if (!event || typeof event.id !== 'string' || typeof event.data?.serviceId !== 'string' || typeof event.data.flagKey !== 'string') {
      this.deps.logger.warn('ignoring a flag-change message without id or data');
      return;
    }
    this.apply(event);
  }

  private async loadAll(): Promise<void> {
    const [services, flags, cohorts] = await Promise.all([this.deps.store.allServices(this.deps.sql), this.deps.store.allFlags(this.deps.sql), this.deps.store.allCohorts(this.deps.sql)]);
    // Cohorts before flags: flags compile against them.
    for (const cohort of cohorts) this.cohortsOf(cohort.projectId).set(cohort.id, cohort);
    for (const row of services) this.services.set(row.id, new ServiceSnapshot(row.id, row.projectId, this.cohortsOf(row.projectId)));
    for (const flag of flags) {
      let service = this.services.get(flag.serviceId);
      if (service === undefined) {
        service = new ServiceSnapshot(flag.serviceId, flag.projectId, this.cohortsOf(flag.projectId));
        this.services.set(flag.serviceId, service);
      }
      service.environments[flag.environment]?.set(flag);
    }
    this.deps.logger.info({ services: services.length, flags: flags.length, cohorts: cohorts.length }, 'evaluation snapshots loaded');
  }

  private async loadService(serviceId: string): Promise<ServiceSnapshot | null> {
    let row: ServiceRow | null;
    let flags: FlagRecord[];
    try {
      [row, flags] = await Promise.all([this.deps.store.service(this.deps.sql, serviceId), this.deps.store.flagsOfService(this.deps.sql, serviceId)]);
    } catch (error) {
      this.flushQueued(serviceId);
      throw error;
    }
    if (row === null) {
      this.unknownUntil.set(serviceId, Date.now() + UNKNOWN_SERVICE_TTL_MS);
      if (this.unknownUntil.size > 10_000) this.unknownUntil.clear();
      this.flushQueued(serviceId);
      return this.services.get(serviceId) ?? null;
    }
    // An event may have created the entry meanwhile (it was queued, so not yet): build fresh.
    const service = new ServiceSnapshot(row.id, row.projectId, this.cohortsOf(row.projectId));
    for (const flag of flags) service.environments[flag.environment]?.set(flag);
    this.services.set(serviceId, service);
    this.flushQueued(serviceId);
    return service;
  }

  private flushQueued(serviceId: string) {
    const entry = this.loading.get(serviceId);
    if (!entry) return;
    this.loading.delete(serviceId);
    for (const event of entry.queued) this.apply(event);
  }

  private remember(id: string) {
    this.recentIds.add(id);
    if (this.recentIds.size > RECENT_EVENT_IDS) {
      // Sets iterate in insertion order: forget the oldest.
      const oldest = this.recentIds.values().next().value;
      if (oldest !== undefined) this.recentIds.delete(oldest);
    }
  }
}

/** Ids of the events a reconcile pass makes up (bus events have other ids). */
const SYNTHETIC_PREFIX = 'r:';

/** What the bus changed while a reconcile pass read Postgres. */
interface Touched {
  services: Set<string>;
  flags: Set<string>;
  cohorts: Set<string>;
}

/**
 * The change a cohort event makes to one flag that names it: the flag as it is (same version),
 * recompiled. Its id is derived from the cohort event's, so every replica emits the same one.
 */
function cohortFlagEvent(event: CohortChangeEvent, flag: FlagRecord): FlagChangeEvent {
  return {
    id: `${event.id}:${flag.id}`,
    event: 'flag.updated',
    timestamp: event.timestamp,
    data: { flagKey: flag.key, projectId: flag.projectId, serviceId: flag.serviceId, environment: flag.environment, changes: {} },
    flag,
    actor: event.actor,
    actorUserId: event.actorUserId,
  };
}

/** A cohort change found by reconcile; its id is derived from the cohort and version, like syntheticEvent's. */
function syntheticCohortEvent(cohort: CohortRecord, version: number, after: CohortRecord | null): CohortChangeEvent {
  return {
    id: `${SYNTHETIC_PREFIX}cohort:${cohort.id}:${version}${after === null ? ':deleted' : ''}`,
    event: after === null ? 'cohort.deleted' : 'cohort.updated',
    timestamp: after?.updatedAt ?? new Date().toISOString(),
    projectId: cohort.projectId,
    cohortId: cohort.id,
    version,
    cohort: after,
    actor: 'system',
    actorUserId: null,
  };
}

/** One flag's place: service, environment and key. */
function flagSlot(f: { serviceId: string; environment: string; key: string }): string {
  return `${f.serviceId}\u0000${f.environment}\u0000${f.key}`;
}

/**
 * A change found by reconcile rather than received from the bus. Its id is derived from the
 * flag and version, so every replica that repairs the same gap emits the same stream id.
 */
function syntheticEvent(record: FlagRecord, before: FlagRecord | undefined, after: FlagRecord | null): FlagChangeEvent {
  return {
    id: after ? `${SYNTHETIC_PREFIX}${after.id}:${after.version}` : `${SYNTHETIC_PREFIX}${record.id}:${record.version}:deleted`,
    event: after === null ? 'flag.deleted' : before === undefined ? 'flag.created' : 'flag.updated',
    timestamp: after?.updatedAt ?? new Date().toISOString(),
    data: { flagKey: record.key, projectId: record.projectId, serviceId: record.serviceId, environment: record.environment, changes: {} },
    flag: after,
    actor: 'system',
    actorUserId: null,
  };
}
