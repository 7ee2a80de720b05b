import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Analytics } from '../../../analytics/client';
import type { TableWriterStats } from '../../../analytics/writer';
import type { Cache } from '../../infra/cache';
import type { Database } from '../../infra/postgres';
import type { Temporal } from '../../infra/temporal';
import { defineRoute, reply, type AnyRoute } from '../../http/route';

export interface HealthDeps {
  cache: Cache;
  db: Database;
  analytics: Analytics;
  temporal?: Temporal;
  version: { app: string; commit: string; environment: string };
  instanceId: string;
  /** Extra checks contributed by other features (evaluation pipeline …), by name. */
  evaluationChecks?: () => Promise<Record<string, Check>>;
  /** The analytics writer's state per table: buffered, written, dropped rows, last error. */
  analyticsWriterStats?: () => Record<string, TableWriterStats>;
}

export interface Check {
  working: boolean;
  testTime: number;
  error?: string;
}

async function timed(fn: () => Promise<unknown>): Promise<Check> {
  const start = performance.now();
  try {
    await fn();
    return { working: true, testTime: round(performance.now() - start) };
  } catch (error) {
    return { working: false, testTime: round(performance.now() - start), error: (error as Error).message };
  }
}
const round = (ms: number) => Math.round(ms * 100) / 100;

const CheckSchema = z.object({ working: z.boolean(), testTime: z.number(), error: z.string().optional() });
const HealthSchema = z.object({
  status: z.enum(['ok', 'degraded']),
  timestamp: z.string(),
  version: z.object({ app: z.string(), commit: z.string(), environment: z.string() }),
  cache: z.object({ backend: z.string(), readCache: CheckSchema, writeCache: CheckSchema }),
  storage: z.object({ backend: z.string() }).passthrough(),
});

/** The public check says what failed, never why: backend error text is for administrators. */
const withoutError = ({ error: _hidden, ...check }: Check): Check => check;

/**
 * Real probes: each check writes and reads back, so "ok" means the path works, not just connects.
 * The detailed endpoints name backends, counters and error texts: instance administrators only.
 */
export function healthRoutes(deps: HealthDeps): AnyRoute[] {
  async function cacheChecks() {
    // A key per probe: concurrent health checks must not read each other's value.
    const value = randomUUID();
    const key = `health:${deps.instanceId}:${value}`;
    const writeCache = await timed(() => deps.cache.set(key, value, 10));
    const readCache = await timed(async () => {
      if ((await deps.cache.get(key)) !== value) throw new Error('read back a different value');
      await deps.cache.del(key);
    });
    return { backend: deps.cache.backend, readCache, writeCache };
  }
  async function storageCheck() {
    return timed(() => deps.db.sql`SELECT 1`);
  }
  async function analyticsCheck() {
    const probeId = randomUUID();
    return timed(async () => {
      await deps.analytics.client.insert({
        table: 'health_probe',
        values: [{ probe_id: probeId, instance: deps.instanceId, written_at: Date.now() }],
        format: 'JSONEachRow',
      });
      const rs = await deps.analytics.client.query({
        query: 'SELECT count() AS n FROM health_probe WHERE instance = {instance:String} AND probe_id = {probeId:String}',
        query_params: { instance: deps.instanceId, probeId },
        format: 'JSONEachRow',
      });
      const [row] = (await rs.json()) as { n: number | string }[];
      if (Number(row?.n) !== 1) throw new Error('probe row not read back');
    });
  }
  async function temporalCheck(): Promise<Check & { used?: false }> {
    // A lone data-plane or ingest process does not use Temporal: nothing to check there.
    if (!deps.temporal?.connected) return { working: true, testTime: 0, used: false };
    const temporal = deps.temporal;
    return timed(() => temporal.client.workflowService.getSystemInfo({}));
  }
  const envelope = (ok: boolean, body: Record<string, unknown>) =>
    reply(ok ? 200 : 503, {
      status: ok ? 'ok' : 'degraded',
      timestamp: new Date().toISOString(),
      version: deps.version,
      ...body,
    });

  return [
    defineRoute({
      method: 'get',
      path: '/api/health',
      summary: 'Liveness with real cache and storage read/write checks',
      tags: ['health'],
      auth: 'public',
      response: HealthSchema,
      async handler() {
        const [cache, storage] = await Promise.all([cacheChecks(), storageCheck()]);
        const ok = cache.readCache.working && cache.writeCache.working && storage.working;
        return envelope(ok, {
          cache: { backend: cache.backend, readCache: withoutError(cache.readCache), writeCache: withoutError(cache.writeCache) },
          storage: { backend: deps.db.backend, ...withoutError(storage) },
        });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/health/admin',
      summary: 'Storage, cache, analytics, workflow engine and auth subsystem status (instance administrators)',
      tags: ['health'],
      auth: 'user',
      access: { instance: 'admin' },
      async handler() {
        const [cache, storage, analytics, temporal, auth] = await Promise.all([
          cacheChecks(),
          storageCheck(),
          analyticsCheck(),
          temporalCheck(),
          timed(() => deps.db.sql`SELECT count(*) FROM sessions WHERE expires_at > now()`),
        ]);
        const writer = deps.analyticsWriterStats?.() ?? {};
        // A table whose latest insert failed is degraded (its rows wait or are dropped, counted).
        const writerHealthy = Object.values(writer).every((table) => table.healthy);
        const ok = [cache.readCache, cache.writeCache, storage, analytics, temporal, auth].every((c) => c.working) && writerHealthy;
        return envelope(ok, {
          cache,
          storage: { backend: deps.db.backend, ...storage },
          analytics: { backend: deps.analytics.backend, ...analytics, writer },
          workflows: { backend: deps.temporal?.devServer ? 'temporal-dev-server' : 'temporal', ...temporal },
          auth: { sessions: auth },
        });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/health/evaluation',
      summary: 'Checks the evaluation pipeline: snapshots, event writer and analytics store (instance administrators)',
      tags: ['health'],
      auth: 'user',
      access: { instance: 'admin' },
      async handler() {
        const [analytics, extra] = await Promise.all([analyticsCheck(), deps.evaluationChecks?.() ?? Promise.resolve({})]);
        const checks: Record<string, Check> = { analytics, ...extra };
        const ok = Object.values(checks).every((c) => c.working);
        return envelope(ok, { checks });
      },
    }),
  ];
}
