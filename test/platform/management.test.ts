import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import postgres from 'postgres';
import { parse } from 'yaml';
import { createLogger } from '../../api/infra/logger';
import { projectPath } from '../../api/infra/paths';
import { snapshotReadiness } from '../../api/features/evaluation/snapshot-health';
import { SnapshotStore } from '../../api/features/evaluation/snapshots';
import { EvaluationStore } from '../../api/features/evaluation/store';
import { startManagementListener } from '../../api/lib/management/listener';
import { Readiness } from '../../api/lib/management/readiness';
import { Metrics } from '../../api/lib/metrics/metrics';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { boundToken, evaluationV1, follow, selector, syncClient } from '../flagd/support';

// The management listener (docs/operations.md#management-listener): metrics, liveness and
// readiness on MANAGEMENT_PORT, on every role, against the real backends.

let app: TestApp;
let fx: DataPlaneFixture;

beforeAll(async () => {
  app = await startTestApp();
  fx = await createFixture(app);
}, 120_000);
afterAll(() => app?.stop());

const management = (target: TestApp = app) => target.running.urls.management!;
const scrape = async (target: TestApp = app) => {
  const res = await fetch(`${management(target)}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
};

/** The value of one series (exact labels in exposition order), undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Every label value of every sample line. */
function labelValues(text: string): string[] {
  const values: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    for (const match of line.matchAll(/[a-zA-Z_][a-zA-Z0-9_]*="((?:[^"\\]|\\.)*)"/g)) values.push(match[1]);
  }
  return values;
}

/** The metric names a scrape exposes, with a histogram's _bucket, _sum and _count series. */
function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const typed = /^# TYPE (\S+) (\S+)/.exec(line);
    if (typed) {
      names.add(typed[1]);
      if (typed[2] === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(typed[1] + suffix);
      continue;
    }
    const name = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (name) names.add(name[1]);
  }
  return names;
}

function promtool(args: string[], input?: string) {
  const result = spawnSync('promtool', args, { input, encoding: 'utf8' });
  if (result.error) throw new Error(`promtool is required (Debian's prometheus package): ${result.error.message}`);
  return result;
}

describe('the management listener', () => {
  it('answers /livez, /readyz once started, and 404/405 for anything else, without credentials', async () => {
    const live = await fetch(`${management()}/livez`);
    expect(live.status).toBe(200);
    const ready = await fetch(`${management()}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
    expect((await fetch(`${management()}/api/health`)).status).toBe(404);
    const post = await fetch(`${management()}/metrics`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    // The public listeners do not serve it (the control plane may answer the console's page).
    expect((await app.request('GET', '/metrics', { listener: 'data' })).status).toBe(404);
    expect((await app.request('GET', '/metrics')).text).not.toContain('flagship_');
  });

  it('has its counters at zero before any traffic, for their known label values', async () => {
    const fresh = await startTestApp({ ROLES: 'data' });
    try {
      const text = await scrape(fresh);
      expect(sample(text, 'flagship_evaluations_total{protocol="rest",reason="TARGETING_MATCH",error_type="none"}')).toBe(0);
      expect(sample(text, 'flagship_evaluations_total{protocol="flagd",reason="ERROR",error_type="FLAG_NOT_FOUND"}')).toBe(0);
      expect(sample(text, 'flagship_stream_disconnects_total{kind="sse",reason="slow_client"}')).toBe(0);
      expect(sample(text, 'flagship_streams_open{kind="flagd_sync"}')).toBe(0);
      expect(sample(text, 'flagship_canary_gate_decisions_total{result="fail"}')).toBe(0);
      expect(sample(text, 'flagship_canary_rollbacks_total{reason="gate_failed"}')).toBe(0);
      expect(sample(text, 'flagship_http_request_duration_seconds_count{route="/api/flags/evaluate",method="POST"}')).toBe(0);
      expect(sample(text, 'flagship_analytics_rows_dropped_total{table="evaluation_events"}')).toBe(0);
      expect(text).toMatch(/^flagship_build_info\{version="[^"]+",commit="[^"]+"\} 1$/m);
    } finally {
      await fresh.stop();
    }
  }, 120_000);

  it('counts real traffic under route templates and fixed vocabularies, never a key, user or token, and passes promtool', async () => {
    const marker = `zq${randomBytes(4).toString('hex')}`;
    const flag = await createFlag(fx.owner, fx.serviceId, { key: `${marker}-flag`, type: 'boolean', enabled: true, defaultValue: true });
    const targetingKey = `${marker}-user@example.com`;
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId, context: { targetingKey } }, (r) => r.value === true, { token: fx.readToken, listener: 'data' });
    const ofrep = await fetch(`${app.urls.data}/api/ofrep/v1/evaluate/flags/${flag.key}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fx.readToken}`, 'content-type': 'application/json', 'x-service-id': fx.serviceId },
      body: JSON.stringify({ context: { targetingKey } }),
    });
    expect(ofrep.status).toBe(200);
    const missing = await app.request('POST', '/api/flags/evaluate', { listener: 'data', token: fx.readToken, body: { flagKey: `${marker}-missing`, serviceId: fx.serviceId } });
    expect(missing.status).toBe(200);
    expect((await fx.owner.request('GET', `/api/flags/${flag.key}?serviceId=${fx.serviceId}&environment=development`)).status).toBe(200);
    expect((await app.request('GET', `/api/${marker}/nothing-here`)).status).toBe(404);
    // A stream opened and closed by its client.
    const stream = new AbortController();
    const sse = await fetch(`${app.urls.data}/api/flags/stream?serviceId=${fx.serviceId}`, { headers: { authorization: `Bearer ${fx.readToken}` }, signal: stream.signal });
    expect(sse.status).toBe(200);
    await eventually(async () => sample(await scrape(), 'flagship_streams_open{kind="sse"}') === 1);
    stream.abort();
    await eventually(async () => sample(await scrape(), 'flagship_stream_disconnects_total{kind="sse",reason="client"}') === 1);
    await app.platform.analyticsWriter.flush();

    const text = await scrape();
    expect(sample(text, 'flagship_evaluations_total{protocol="rest",reason="DEFAULT",error_type="none"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'flagship_evaluations_total{protocol="ofrep",reason="DEFAULT",error_type="none"}')).toBe(1);
    expect(sample(text, 'flagship_evaluations_total{protocol="rest",reason="ERROR",error_type="FLAG_NOT_FOUND"}')).toBe(1);
    expect(sample(text, 'flagship_evaluation_duration_seconds_count{protocol="ofrep"}')).toBe(1);
    expect(sample(text, 'flagship_http_requests_total{route="/api/ofrep/v1/evaluate/flags/:key",method="POST",status="200"}')).toBe(1);
    expect(sample(text, 'flagship_http_requests_total{route="/api/flags/:key",method="GET",status="200"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'flagship_http_requests_total{route="unmatched",method="GET",status="404"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'flagship_http_requests_total{route="/api/flags",method="POST",status="201"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'flagship_snapshot_version{environment="development"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'flagship_change_propagation_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'flagship_analytics_rows_written_total{table="evaluation_events"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'flagship_outbox_pending_events{consumer="bus"}')).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'flagship_postgres_up')).toBe(1);
    expect(sample(text, 'flagship_postgres_pool_max')).toBe(app.platform.config.DATABASE_POOL_SIZE);
    expect(sample(text, 'flagship_temporal_worker_task_slots{kind="activity",state="available"}')).toBeGreaterThan(0);

    // Nothing identifying: no flag key, targeting key, user, project, service or token in any label.
    const secrets = [marker, flag.key, targetingKey, fx.owner.id, fx.owner.email, fx.projectId, fx.serviceId, fx.readToken, fx.readToken.slice(0, 12)];
    const tokens = (await app.platform.db.sql<{ id: string }[]>`SELECT id FROM project_tokens WHERE project_id = ${fx.projectId}`).map((t) => t.id);
    for (const value of labelValues(text)) {
      for (const secret of [...secrets, ...tokens]) expect(value).not.toContain(secret);
    }

    const checked = promtool(['check', 'metrics'], text);
    expect(`${checked.stdout}${checked.stderr}`.trim()).toBe('');
    expect(checked.status).toBe(0);
  }, 120_000);
});

describe('flagd protocols in the metrics', () => {
  it('counts flagd evaluations, open flagd streams, and a revoked token\'s streams ending as revoked', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { type: 'boolean', enabled: true, defaultValue: true });
    const { token: record, value } = await boundToken(fx);
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken, listener: 'data' });
    const before = await scrape();
    const evaluated = (text: string) => sample(text, 'flagship_evaluations_total{protocol="flagd",reason="DEFAULT",error_type="none"}') ?? 0;
    expect((await evaluationV1(app, 'grpc').resolveBoolean({ flagKey: flag.key }, selector(value))).value).toBe(true);

    const aborts = [new AbortController(), new AbortController()];
    const sync = follow(syncClient(app).syncFlags({}, { ...selector(value), signal: aborts[0].signal }));
    const events = follow(evaluationV1(app, 'grpc').eventStream({}, { ...selector(value), signal: aborts[1].signal }));
    try {
      await eventually(async () => sync.messages.length > 0 && events.messages.length > 0);
      const open = await scrape();
      expect(sample(open, 'flagship_streams_open{kind="flagd_sync"}')).toBe(1);
      expect(sample(open, 'flagship_streams_open{kind="flagd"}')).toBe(1);
      expect(evaluated(open)).toBe(evaluated(before) + 1);
      expect((await fx.owner.request('DELETE', `/api/projects/${fx.projectId}/tokens/${record.id}`)).status).toBe(204);
      await eventually(async () => {
        const text = await scrape();
        return sample(text, 'flagship_stream_disconnects_total{kind="flagd_sync",reason="revoked"}') === 1 && sample(text, 'flagship_stream_disconnects_total{kind="flagd",reason="revoked"}') === 1;
      }, 30_000);
      expect(sample(await scrape(), 'flagship_streams_open{kind="flagd_sync"}')).toBe(0);
    } finally {
      for (const abort of aborts) abort.abort();
      await Promise.all([sync.done, events.done]);
    }
  }, 60_000);
});

describe('the Postgres pool in the metrics', () => {
  it('counts the connections in use and the queries waiting for one while the pool is exhausted', async () => {
    const max = app.platform.config.DATABASE_POOL_SIZE;
    const pool = (text: string) => ({
      inUse: sample(text, 'flagship_postgres_pool_connections{state="in_use"}'),
      idle: sample(text, 'flagship_postgres_pool_connections{state="idle"}'),
      waiting: sample(text, 'flagship_postgres_pool_waiting'),
    });
    // Every pool connection blocks on a lock a connection of the test's own holds, until released:
    // the check takes as long as it needs (a scrape can itself wait up to 2 s for its probe query on
    // the exhausted pool), and the release ends every query at once.
    const holder = postgres(app.platform.config.DATABASE_URL!, { max: 1, onnotice: () => undefined });
    const lock = 0x6d657472;
    try {
      await holder`SELECT pg_advisory_lock(${lock})`;
      // Queries run once something waits on them.
      const blocked = Array.from({ length: max + 3 }, () => app.platform.db.sql`SELECT pg_advisory_xact_lock_shared(${lock})`.then(() => undefined));
      try {
        // Every connection blocks; the three queries beyond them wait (with anything else the
        // process asks for meanwhile, such as the scrape's own probe).
        await eventually(async () => {
          const now = pool(await scrape());
          return now.inUse === max && (now.waiting ?? 0) >= 3 ? now : undefined;
        }, 30_000);
      } finally {
        await holder`SELECT pg_advisory_unlock(${lock})`;
        await Promise.all(blocked);
      }
    } finally {
      await holder.end();
    }
    await eventually(async () => {
      const now = pool(await scrape());
      return now.waiting === 0 && (now.inUse ?? 0) + (now.idle ?? 0) <= max;
    });
  }, 60_000);
});

describe('readiness', () => {
  it('is 503 with the reason until the snapshots have loaded, then 200', async () => {
    const snapshots = new SnapshotStore({ sql: app.platform.db.sql, store: new EvaluationStore(), cache: app.platform.cache, logger: createLogger('silent'), reconcileIntervalMs: 0 });
    const readiness = new Readiness();
    readiness.require('snapshots', snapshotReadiness(snapshots));
    const listener = await startManagementListener({ host: '127.0.0.1', port: 0, registry: new Metrics({ version: 't', commit: 't' }).registry, readiness, logger: createLogger('silent') });
    try {
      const before = await fetch(`${listener.url}/readyz`);
      expect(before.status).toBe(503);
      expect(await before.json()).toEqual({ status: 'unready', reasons: { snapshots: 'evaluation snapshots not loaded yet' } });
      await snapshots.start();
      const after = await fetch(`${listener.url}/readyz`);
      expect(after.status).toBe(200);
      readiness.drain();
      const draining = await fetch(`${listener.url}/readyz`);
      expect(draining.status).toBe(503);
      expect(((await draining.json()) as { reasons: object }).reasons).toHaveProperty('draining');
    } finally {
      await snapshots.stop();
      await listener.close();
    }
  });

  it('stays ready on a data plane whose Postgres became unreachable once its snapshots loaded, and keeps serving', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'from-snapshot' });
    const proxy = await tcpProxy(new URL(app.databaseUrl).port);
    const url = new URL(app.databaseUrl);
    url.port = String(proxy.port);
    const data = await startTestApp({ ROLES: 'data', DATABASE_URL: url.toString() });
    try {
      await untilEvaluated(data, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === 'from-snapshot', { token: fx.readToken, listener: 'data' });
      expect((await fetch(`${management(data)}/readyz`)).status).toBe(200);
      await proxy.close();

      const ready = await fetch(`${management(data)}/readyz`);
      expect(ready.status).toBe(200);
      const evaluated = await data.request('POST', '/api/flags/evaluate', { listener: 'data', token: fx.readToken, body: { flagKey: flag.key, serviceId: fx.serviceId } });
      expect(evaluated.body).toMatchObject({ value: 'from-snapshot' });
      // The scrape answers without waiting on the lost database, and says so.
      const text = await scrape(data);
      expect(sample(text, 'flagship_postgres_up')).toBe(0);
    } finally {
      await proxy.close();
      await data.stop({ keepDatabase: true });
    }
  }, 120_000);
});

describe('the worker-only role', () => {
  it('serves /metrics, /livez and /readyz on its management listener', async () => {
    const worker = await startTestApp({ ROLES: 'worker', DATABASE_URL: app.databaseUrl });
    try {
      expect(Object.keys(worker.running.urls).sort()).toEqual(['management']);
      const text = await scrape(worker);
      expect(sample(text, 'flagship_temporal_worker_task_slots{kind="workflow",state="available"}')).toBeGreaterThan(0);
      expect(sample(text, 'flagship_temporal_workflow_failures')).toBeGreaterThanOrEqual(0);
      expect((await fetch(`${management(worker)}/livez`)).status).toBe(200);
      expect((await fetch(`${management(worker)}/readyz`)).status).toBe(200);
    } finally {
      await worker.stop({ keepDatabase: true });
    }
  }, 120_000);
});

/** A TCP proxy to the local Postgres that can be cut: close() drops every connection and refuses new ones. */
async function tcpProxy(targetPort: string): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(targetPort), '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  let closed: Promise<void> | undefined;
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      return closed;
    },
  };
}

/** PromQL words that are not metric names: functions, aggregations, keywords, Grafana's variables. */
const PROMQL_WORDS = new Set([
  'sum', 'max', 'min', 'avg', 'count', 'rate', 'increase', 'delta', 'deriv', 'irate', 'histogram_quantile', 'time', 'by', 'without',
  'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset', 'topk', 'bottomk', 'abs', 'clamp_min', 'clamp_max',
]);

/** The metric names a PromQL expression reads: identifiers outside label matchers, groupings, ranges and strings. */
function metricsOf(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\w+/g, ' ');
  return [...bare.matchAll(/\b[a-zA-Z_:][a-zA-Z0-9_:]*\b/g)].map((m) => m[0]).filter((word) => !PROMQL_WORDS.has(word) && !/^\d/.test(word) && !/^[0-9.e]+$/.test(word));
}

describe('deploy/: alert rules and the Grafana dashboard', () => {
  it('has alert rules promtool accepts, each reading metrics a real scrape exposes', async () => {
    const checked = promtool(['check', 'rules', projectPath('deploy', 'prometheus', 'alerts.yml')]);
    expect(`${checked.stdout}${checked.stderr}`).toMatch(/SUCCESS/);
    expect(checked.status).toBe(0);
    const names = exposedNames(await scrape());
    const rules = parse(fs.readFileSync(projectPath('deploy', 'prometheus', 'alerts.yml'), 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] };
    const read = rules.groups.flatMap((g) => g.rules).map((rule) => [rule.alert, metricsOf(rule.expr)] as const);
    for (const [alert, metrics] of read) {
      expect([alert, metrics.length > 0]).toEqual([alert, true]);
      for (const metric of metrics) expect([alert, metric, names.has(metric)]).toEqual([alert, metric, true]);
    }
  });

  it('has a dashboard whose every panel queries only metrics a real scrape exposes', async () => {
    const names = exposedNames(await scrape());
    const dashboard = JSON.parse(fs.readFileSync(projectPath('deploy', 'grafana', 'flagship.json'), 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
    expect(dashboard.panels.length).toBeGreaterThan(10);
    for (const panel of dashboard.panels) {
      expect([panel.title, panel.targets.length > 0]).toEqual([panel.title, true]);
      for (const target of panel.targets) {
        const metrics = metricsOf(target.expr);
        expect([panel.title, metrics.length > 0]).toEqual([panel.title, true]);
        for (const metric of metrics) expect([panel.title, metric, names.has(metric)]).toEqual([panel.title, metric, true]);
      }
    }
  });
});
