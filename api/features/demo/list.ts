import { createHash } from 'node:crypto';
import { HANDLED, reply } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { LIST_DEFAULT_LIMIT, pageBody, pageRequest, type FlagListOverride, type FlagListQuery, type ListPageBody, type PageRequest } from '../flags/list-paging';
import type { FlagService } from '../flags/service';
import type { Environment } from '../../domain/environments';
import { FLAG_CHANGES_CHANNEL, type FlagChangeEvent, type FlagRecord } from '../flags/types';
import type { DemoServiceRegistry } from './registry';

/** The list page size on a demo service (docs/api-reference.md#demo-service, docs/limits.md). */
export const DEMO_LIST_MAX_LIMIT = 4096;

export interface DemoFlagListDeps {
  sql: Sql;
  flags: FlagService;
  registry: DemoServiceRegistry;
  cache: Cache;
  logger: Logger;
  /** Safety net for a lost bus message: a cached grid is re-read after this long. */
  maxAgeMs?: number;
}

interface Page {
  body: Buffer;
  etag: string;
}

interface Snapshot {
  rows: FlagRecord[];
  /** Position of each flag in `rows`, by id. */
  positions: Map<string, number>;
  loadedAt: number;
  /** Serialized pages by (fields, limit, offset). */
  pages: Map<string, Page>;
}

const MAX_PAGES_PER_SNAPSHOT = 32;
const MAX_SNAPSHOTS = 64;
const ALL_ENVIRONMENTS = '*';

/**
 * Demo list reads (docs/api-reference.md#demo-service). The plain grid request (no filters, no
 * cursor) is served from memory: the flags of a (service, environment) are read once, and each page
 * is serialized once per (fields, limit, offset) with its weak ETag (a hash of the body, so it
 * changes exactly when what the caller would see changes, and every replica computes the same one).
 * A FlagChangeEvent for the service on the bus carries the changed flag: an update or toggle
 * replaces it in the cached grid (newer versions only, so a late or repeated event is harmless) and
 * drops the serialized pages; a create or delete drops the grid. A read that was under way when a
 * change arrived is served but not kept. After `maxAgeMs` a grid is re-read in the background while
 * the cached one keeps serving (a safety net for a lost bus message). Filtered or cursor requests
 * go to the store like any list, with an ETag too.
 */
export class DemoFlagList {
  private readonly snapshots = new Map<string, Snapshot>();
  private readonly loading = new Map<string, Promise<Snapshot>>();
  private readonly generations = new Map<string, number>();
  private readonly projects = new Map<string, string | null>();
  private unsubscribe?: () => Promise<void>;

  constructor(private readonly deps: DemoFlagListDeps) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.deps.cache.subscribe(FLAG_CHANGES_CHANNEL, (message) => {
      try {
        const event = JSON.parse(message) as FlagChangeEvent;
        if (!this.deps.registry.isDemoService(event.data.serviceId)) return;
        if (event.flag && (event.event === 'flag.updated' || event.event === 'flag.toggled')) this.apply([event.flag]);
        else this.invalidate(event.data.serviceId, event.data.environment);
      } catch (error) {
        this.deps.logger.warn({ err: error }, 'unreadable flag change on the bus');
      }
    });
  }

  /**
   * Reads the grid of every demo service in every environment in the background, so no caller
   * pays the first read (about 100 ms for 4,096 flags).
   */
  warmUp(environments: readonly Environment[]): void {
    for (const serviceId of this.deps.registry.demoServiceIds()) {
      for (const environment of environments) {
        this.snapshot(serviceId, environment).catch((error) => this.deps.logger.warn({ err: error, serviceId }, 'warming the demo grid failed'));
      }
    }
  }

  async stop(): Promise<void> {
    await this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /** Forgets the cached grid of the service in `environment` (and the all-environments one). */
  invalidate(serviceId: string, environment: Environment): void {
    for (const scope of [scopeKey(serviceId, environment), scopeKey(serviceId, ALL_ENVIRONMENTS)]) {
      this.generations.set(scope, (this.generations.get(scope) ?? 0) + 1);
      this.snapshots.delete(scope);
      this.loading.delete(scope);
    }
  }

  /** Puts changed flags (same id, newer version) into the cached grids; a flag a grid does not hold drops that grid. */
  apply(flags: FlagRecord[]): void {
    for (const flag of flags) {
      for (const scope of [scopeKey(flag.serviceId, flag.environment), scopeKey(flag.serviceId, ALL_ENVIRONMENTS)]) {
        // A read under way may predate this change: it is served, not kept.
        this.generations.set(scope, (this.generations.get(scope) ?? 0) + 1);
        const snapshot = this.snapshots.get(scope);
        if (!snapshot) continue;
        const at = snapshot.positions.get(flag.id);
        if (at === undefined) {
          this.snapshots.delete(scope);
          continue;
        }
        if (snapshot.rows[at].version >= flag.version) continue;
        snapshot.rows[at] = flag;
        snapshot.pages.clear();
      }
    }
  }

  /**
   * Asked first by the flags list route: answers the request when it lists a demo service
   * (anyone, projectId optional, up to 4,096 per page, weak ETag and 304), otherwise returns
   * undefined and the route goes on with its normal, authenticated path.
   */
  readonly handle: FlagListOverride = async ({ query, req, res }) => {
    const started = process.hrtime.bigint();
    const serviceId = query.serviceId;
    if (!serviceId || !this.deps.registry.isDemoService(serviceId)) return undefined;
    const projectId = await this.projectOf(serviceId);
    // Another project named alongside a demo service is an ordinary (authorized) list.
    if (query.projectId !== undefined && query.projectId !== projectId) return undefined;
    const request = pageRequest(query, Math.min(query.limit ?? LIST_DEFAULT_LIMIT, DEMO_LIST_MAX_LIMIT));
    const plain = !query.search && !query.tags?.length && query.enabled === undefined && !query.type && !query.cursor;
    const page = plain
      ? await this.cachedPage(serviceId, query.environment, request.limit, request.offset, query.fields)
      : await this.filteredPage(projectId, serviceId, query, request);
    const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;

    res.setHeader('ETag', page.etag);
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('Server-Timing', `demo-list;dur=${elapsedMs.toFixed(3)}`);
    if (etagMatches(req.get('if-none-match'), page.etag)) return reply(304);
    res.status(200);
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Content-Length', String(page.body.length));
    res.end(page.body);
    return HANDLED;
  };

  private async cachedPage(serviceId: string, environment: Environment | undefined, limit: number, offset: number, fields?: string[]): Promise<Page> {
    const snapshot = await this.snapshot(serviceId, environment);
    const pageKey = `${fields?.join(',') ?? ''}|${limit}|${offset}`;
    let page = snapshot.pages.get(pageKey);
    if (!page) {
      const rows = { flags: snapshot.rows.slice(offset, offset + limit), total: snapshot.rows.length };
      page = render(pageBody({ ...rows, hasAfter: rows.total > offset + limit, hasBefore: offset > 0 }, { limit, offset }, fields));
      if (snapshot.pages.size < MAX_PAGES_PER_SNAPSHOT) snapshot.pages.set(pageKey, page);
    }
    return page;
  }

  private async filteredPage(projectId: string | null, serviceId: string, query: FlagListQuery, request: PageRequest): Promise<Page> {
    const page =
      projectId === null
        ? { flags: [], total: 0, hasAfter: false, hasBefore: false }
        : await this.deps.flags.list(
            { projectId, serviceId, environment: query.environment, search: query.search, tags: query.tags, enabled: query.enabled, type: query.type },
            request,
          );
    return render(pageBody(page, request, query.fields));
  }

  private snapshot(serviceId: string, environment: Environment | undefined): Promise<Snapshot> {
    const scope = scopeKey(serviceId, environment ?? ALL_ENVIRONMENTS);
    const cached = this.snapshots.get(scope);
    const fresh = cached && Date.now() - cached.loadedAt < (this.deps.maxAgeMs ?? 60_000);
    const inFlight = this.loading.get(scope);
    if (cached && (fresh || inFlight)) return Promise.resolve(cached);
    if (inFlight) return inFlight;

    const generation = this.generations.get(scope) ?? 0;
    const load: Promise<Snapshot> = this.readGrid(serviceId, environment)
      .then((rows) => {
        const snapshot: Snapshot = { rows, positions: new Map(rows.map((r, i) => [r.id, i])), loadedAt: Date.now(), pages: new Map() };
        // A change arrived while we were reading: answer this request, but do not keep it. The
        // grid it would have replaced is being patched by those changes, so it counts as fresh
        // again (under a steady stream of writes, no re-read after re-read).
        if ((this.generations.get(scope) ?? 0) === generation) this.keep(scope, snapshot);
        else if (cached && this.snapshots.get(scope) === cached) cached.loadedAt = Date.now();
        return snapshot;
      })
      .finally(() => {
        if (this.loading.get(scope) === load) this.loading.delete(scope);
      });
    this.loading.set(scope, load);
    if (cached) {
      // Expired: keep serving the cached grid while the new one loads.
      load.catch((error) => this.deps.logger.warn({ err: error }, 'refreshing the demo grid failed'));
      return Promise.resolve(cached);
    }
    return load;
  }

  private keep(scope: string, snapshot: Snapshot) {
    this.snapshots.delete(scope);
    this.snapshots.set(scope, snapshot);
    // Oldest first in insertion order: a bounded number of grids stays in memory.
    while (this.snapshots.size > MAX_SNAPSHOTS) this.snapshots.delete(this.snapshots.keys().next().value!);
  }

  /** In list order (key, id), like the store. */
  private readGrid(serviceId: string, environment: Environment | undefined): Promise<FlagRecord[]> {
    return this.deps.flags.listByService(serviceId, environment);
  }

  /** A service never changes project; a missing one is asked again next time. */
  private async projectOf(serviceId: string): Promise<string | null> {
    const known = this.projects.get(serviceId);
    if (known) return known;
    const [row] = await this.deps.sql<{ project_id: string }[]>`SELECT project_id FROM services WHERE id = ${serviceId}`;
    const projectId = row?.project_id ?? null;
    if (projectId) this.projects.set(serviceId, projectId);
    return projectId;
  }
}

function scopeKey(serviceId: string, environment: string): string {
  return `${serviceId}\u0000${environment}`;
}

function render(body: ListPageBody): Page {
  const buffer = Buffer.from(JSON.stringify(body));
  return { body: buffer, etag: `W/"${createHash('sha1').update(buffer).digest('base64url')}"` };
}

/** RFC 9110 If-None-Match: weak comparison, a list of tags, or `*`. */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  const wanted = opaque(etag);
  return header.split(',').some((tag) => tag.trim() === '*' || opaque(tag) === wanted);
}
