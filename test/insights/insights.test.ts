import { randomBytes } from 'node:crypto';
import type { ZodTypeAny } from 'zod';
import { AlertsResponse, AutoRollbackResponse, HealthResponse, HeatmapResponse, MetricsResponse, StaleFlagsResponse, ToggleImpactResponse } from '../../api/features/insights/schemas';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, expectStatus, opaqueToken, personalToken, qs, startReceiver, uniquePath, type Project, type Receiver } from '../webhooks/support';

/**
 * Flag insights over HTTP against real Postgres, Temporal and chDB: known evaluation events go
 * into evaluation_events (the materialized view fills evaluation_minutes) and the answers are
 * checked to the unit; percentiles within t-digest's error (about 1% of the value range, checked
 * at 2%). Windows are whole minutes ending with the current one, so tests keep clear of a minute
 * change while they run.
 */

const MINUTE = 60_000;
let app: TestApp;
let receiver: Receiver;
let p: Project;
let other: Project;

beforeAll(async () => {
  app = await startTestApp();
  receiver = await startReceiver();
  p = await createProject(app);
  other = await createProject(app);
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const newKey = (label: string) => `${label}-${randomBytes(3).toString('hex')}`;
/** DateTime64(3) text in UTC, as JSONEachRow reads it. */
const ts = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);
const floorMinute = (ms: number) => Math.floor(ms / MINUTE) * MINUTE;

interface Evaluation {
  at: number;
  latencyMs?: number;
  reason?: string;
  value?: string;
  /** A failed evaluation: reported as evaluationErrors, not as an application error. */
  errorCode?: string;
  /** The application reports an `error` outcome for this evaluation's user at the same time. */
  appError?: boolean;
}

/** Evaluations of one flag by users of their own (`<flagKey>-u<i>`), and the `error` outcomes of those that report one. */
async function insertEvaluations(tenant: { projectId: string; serviceId: string }, flagKey: string, events: Evaluation[], environment = 'production') {
  const user = (i: number) => `${flagKey}-u${i}`;
  const outcomes = events.flatMap((e, i) =>
    e.appError
      ? [{ timestamp: ts(e.at), project_id: tenant.projectId, service_id: tenant.serviceId, environment, event: 'error', targeting_key_hash: user(i), value: null, flags: {}, origin: 'track', event_id: randomBytes(6).toString('hex') }]
      : [],
  );
  if (outcomes.length) await app.platform.analytics.client.insert({ table: 'outcome_events', values: outcomes, format: 'JSONEachRow' });
  const values = events.map((e, i) => ({
    timestamp: ts(e.at),
    project_id: tenant.projectId,
    service_id: tenant.serviceId,
    environment,
    flag_key: flagKey,
    reason: e.reason ?? (e.errorCode ? 'ERROR' : 'TARGETING_MATCH'),
    variant: '',
    value: e.value ?? 'true',
    latency_ms: e.latencyMs ?? 1,
    error_code: e.errorCode ?? '',
    targeting_key_hash: user(i),
    source: 'rest',
  }));
  await app.platform.analytics.client.insert({ table: 'evaluation_events', values, format: 'JSONEachRow' });
}

/** The body has every field its documented response schema declares, of the declared type. */
function expectDocumented(schema: ZodTypeAny, body: unknown) {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new Error(`response does not match its schema: ${JSON.stringify(parsed.error.issues.slice(0, 5))}`);
}

const many = <T,>(n: number, make: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => make(i));

/** Waits until at least `margin` ms remain before the next minute: the windows must not move mid-test. */
async function clearOfMinuteEdge(margin = 20_000) {
  const left = MINUTE - (Date.now() % MINUTE);
  if (left < margin) await new Promise((r) => setTimeout(r, left + 200));
}

/** Exact nearest-rank percentile. */
function percentile(sorted: number[], q: number) {
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];
}

async function toggle(user: Project['owner'], key: string, enabled: boolean) {
  const res = await user.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, { enabled });
  expectStatus(res, 200, 'toggle');
  return res.body as { version: number; enabled: boolean };
}

describe('GET /api/flags/:key/metrics', () => {
  it('answers exact counts, breakdowns, a full time series and percentiles within the t-digest error', async () => {
    await clearOfMinuteEdge(30_000);
    const key = newKey('metrics');
    await createFlag(p.owner, p.serviceId, key);
    const now = Date.now();
    const end = floorMinute(now) + MINUTE;
    const start = end - 60 * MINUTE;
    // 1000 evaluations 30 and 20 minutes ago, latency 1..1000 ms, 50 failed evaluations whose users also report an error, two values.
    const bulk = many(1000, (i) => ({
      at: floorMinute(now - (i < 500 ? 30 : 20) * MINUTE) + (i % 500) * 7,
      latencyMs: i + 1,
      reason: i < 50 ? 'ERROR' : i < 650 ? 'TARGETING_MATCH' : 'DEFAULT',
      errorCode: i < 50 ? 'TYPE_MISMATCH' : undefined,
      appError: i < 50,
      value: i < 600 ? 'true' : 'false',
    }));
    const recent = many(10, (i) => ({ at: now - 10_000 - i, latencyMs: 5, reason: 'DEFAULT', value: 'false', errorCode: i === 0 ? 'GENERAL' : undefined, appError: i === 0 }));
    const older = many(5, (i) => ({ at: now - 7 * MINUTE - i, latencyMs: 5, reason: 'DEFAULT', value: 'false' }));
    const edges = [
      { at: start, latencyMs: 5, reason: 'DEFAULT', value: 'false' }, // exactly the range start: counted
      { at: start - 1, latencyMs: 5, reason: 'DEFAULT', value: 'false' }, // a millisecond before: not
      { at: end, latencyMs: 5, reason: 'DEFAULT', value: 'false' }, // the range end (next minute): not
    ];
    await insertEvaluations(p, key, [...bulk, ...recent, ...older, ...edges]);

    const res = await p.viewer.request('GET', `/api/flags/${key}/metrics${qs({ serviceId: p.serviceId, range: '1h' })}`);
    expectStatus(res, 200, 'metrics');
    expect(res.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expectDocumented(MetricsResponse, res.body);
    const m = res.body;
    expect(m.range).toEqual({ start: new Date(start).toISOString(), end: new Date(end).toISOString(), rangeLabel: '1h', minutes: 60 });
    expect(m).toMatchObject({ flagKey: key, serviceId: p.serviceId, environment: 'production', source: 'evaluation_minutes' });

    const counted = [...bulk, ...recent, ...older, edges[0]];
    const total = counted.length; // 1016
    const errors = 51;
    const latencies = counted.map((e) => e.latencyMs!).sort((a, b) => a - b);
    expect(m.summary.totalEvaluations).toBe(total);
    expect(m.summary.totalErrors).toBe(errors);
    expect(m.summary.errorRate).toBeCloseTo(errors / total, 6);
    expect(m.summary.evaluationErrors).toBe(errors);
    expect(m.summary.avgLatencyMs).toBeCloseTo(latencies.reduce((s, l) => s + l, 0) / total, 2);
    expect(m.summary.evaluationsPerMinute).toBeCloseTo(total / 60, 3);
    expect(m.summary.evaluationsPerSecond).toBeCloseTo(total / 3600, 4);
    for (const [field, q] of [['p50LatencyMs', 0.5], ['p95LatencyMs', 0.95], ['p99LatencyMs', 0.99]] as const) {
      expect(Math.abs(m.summary[field] - percentile(latencies, q))).toBeLessThanOrEqual(0.02 * 1000);
    }

    expect(m.reasonBreakdown).toEqual({ ERROR: 50, TARGETING_MATCH: 600, DEFAULT: 350 + 10 + 5 + 1 });
    expect(m.valueBreakdown).toEqual({ true: 600, false: 400 + 10 + 5 + 1 });

    expect(m.timeSeries).toHaveLength(60);
    expect(m.timeSeries[0].timestamp).toBe(new Date(start).toISOString());
    expect(m.timeSeries.reduce((s: number, b: { evaluations: number }) => s + b.evaluations, 0)).toBe(total);
    const thirtyAgo = m.timeSeries.find((b: { timestamp: string }) => b.timestamp === new Date(floorMinute(now - 30 * MINUTE)).toISOString());
    expect(thirtyAgo).toMatchObject({ evaluations: 500, errors: 50, evaluationErrors: 50 });
    expect(Math.abs(thirtyAgo.p50LatencyMs - 250)).toBeLessThanOrEqual(10);
    const empty = m.timeSeries.find((b: { evaluations: number }) => b.evaluations === 0);
    expect(empty).toMatchObject({ errors: 0, avgLatencyMs: null, p99LatencyMs: null });

    expect(m.realtime).toMatchObject({
      evaluationsLastMinute: 10,
      evaluationsLast5Min: 10,
      errorRateLastMinute: 0.1,
      evaluationErrorsLastMinute: 1,
      trend: 'increasing',
      topReason: 'DEFAULT',
      lastEvaluatedAt: new Date(now - 10_000).toISOString(),
    });
    expect(m.realtime.evaluationsPerSecond).toBeCloseTo(10 / 60, 3);
    expect(m.recentToggles).toEqual([]);
    expect(m.toggleImpact).toMatchObject({ hasRecentToggle: false, healthStatus: 'none' });
  });

  it('defaults to 24h in 15-minute buckets and refuses unknown ranges and bad parameters', async () => {
    const key = newKey('ranges');
    await createFlag(p.owner, p.serviceId, key);
    const res = await p.viewer.request('GET', `/api/flags/${key}/metrics${qs({ serviceId: p.serviceId })}`);
    expectStatus(res, 200, 'metrics default range');
    expectDocumented(MetricsResponse, res.body);
    expect(res.body.range).toMatchObject({ rangeLabel: '24h', minutes: 1440 });
    expect(res.body.timeSeries).toHaveLength(96);
    expect(res.body.summary).toMatchObject({ totalEvaluations: 0, errorRate: 0, p99LatencyMs: null });
    for (const [range, buckets] of [['7d', 168], ['30d', 120]] as const) {
      const r = await p.viewer.request('GET', `/api/flags/${key}/metrics${qs({ serviceId: p.serviceId, range })}`);
      expect(r.body.timeSeries).toHaveLength(buckets);
    }
    for (const query of [{ serviceId: p.serviceId, range: '2h' }, { serviceId: p.serviceId, range: '15m' }, {}, { serviceId: p.serviceId, environment: 'qa' }, { serviceId: p.serviceId, windowMinutes: 0 }]) {
      const r = await p.viewer.request('GET', `/api/flags/${key}/metrics${qs(query)}`);
      expect(r.status).toBe(400);
      expect(r.body.error).toBe('Bad Request');
    }
    const missing = await p.viewer.request('GET', `/api/flags/no-such-flag/metrics${qs({ serviceId: p.serviceId })}`);
    expect(missing.status).toBe(404);
  });

  it('needs a credential and access to the project', async () => {
    const key = newKey('access');
    await createFlag(p.owner, p.serviceId, key);
    const path = `/api/flags/${key}/metrics${qs({ serviceId: p.serviceId })}`;
    expect((await app.request('GET', path)).status).toBe(401);
    expect((await other.owner.request('GET', path)).status).toBe(404);
    expect((await app.request('GET', path, { token: await opaqueToken(other.owner, other.projectId, { read: true }) })).status).toBe(404);
    expect((await app.request('GET', path, { token: await opaqueToken(p.owner, p.projectId, { read: true }) })).status).toBe(200);
    expect((await app.request('GET', path, { token: await personalToken(p.viewer, 'read') })).status).toBe(200);
    for (const route of ['toggle-impact', 'auto-rollback']) {
      expect((await app.request('GET', `/api/flags/${key}/${route}${qs({ serviceId: p.serviceId })}`)).status).toBe(401);
      expect((await other.owner.request('GET', `/api/flags/${key}/${route}${qs({ serviceId: p.serviceId })}`)).status).toBe(404);
    }
  });
});

/**
 * A flag switched on now, with 100 evaluations before and 100 after, of whose users `beforeErrors`
 * and `afterErrors` report an application error; and failed evaluations on either side, which
 * are reported apart and do not count as errors.
 */
async function toggledFlag(label: string, beforeErrors: number, afterErrors: number, afterLatencyMs = 10) {
  const key = newKey(label);
  await createFlag(p.owner, p.serviceId, key);
  await toggle(p.owner, key, true);
  const impact = await p.viewer.request('GET', `/api/flags/${key}/toggle-impact${qs({ serviceId: p.serviceId })}`);
  expectStatus(impact, 200, 'toggle impact');
  const at: number = impact.body.impact.latestToggle.timestampMs;
  await insertEvaluations(p, key, [
    ...many(100, (i) => ({ at: at - 5 * MINUTE + i, latencyMs: 10, appError: i < beforeErrors })),
    // The windows split at the toggle's millisecond; outside both, nothing counts.
    { at: at - 15 * MINUTE - 1, latencyMs: 10, appError: true },
    ...many(100, (i) => ({ at: at + 2 * MINUTE + i, latencyMs: afterLatencyMs, appError: i < afterErrors, errorCode: i % 10 === 9 ? 'GENERAL' : undefined })),
    { at: at + 15 * MINUTE, latencyMs: 10, appError: true },
  ]);
  return { key, at };
}

describe('GET /api/flags/:key/toggle-impact', () => {
  it('compares the windows before and after the latest toggle', async () => {
    const { key, at } = await toggledFlag('impact', 0, 30);
    const res = await p.viewer.request('GET', `/api/flags/${key}/toggle-impact${qs({ serviceId: p.serviceId, windowMinutes: 15 })}`);
    expectStatus(res, 200, 'toggle impact');
    expect(res.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expectDocumented(ToggleImpactResponse, res.body);
    const { impact, recentToggles } = res.body;
    expect(res.body).toMatchObject({ flagKey: key, serviceId: p.serviceId, environment: 'production', range: { rangeLabel: '24h' } });
    expect(impact.latestToggle).toMatchObject({ timestampMs: at, timestamp: new Date(at).toISOString(), transition: { from: 'disabled', to: 'enabled' }, environment: 'production', actor: p.owner.email });
    expect(impact.latestToggle.durationMs).toBeGreaterThanOrEqual(0);
    expect(recentToggles).toEqual([impact.latestToggle]);
    expect(impact).toMatchObject({ hasRecentToggle: true, healthStatus: 'degraded', windowMinutes: 15 });
    expect(impact.before).toMatchObject({ evaluations: 100, errors: 0, errorRate: 0, evaluationErrors: 0, avgLatencyMs: 10, p99LatencyMs: 10 });
    expect(impact.before).toMatchObject({ start: new Date(at - 15 * MINUTE).toISOString(), end: new Date(at).toISOString() });
    expect(impact.after).toMatchObject({ start: new Date(at).toISOString(), end: new Date(at + 15 * MINUTE).toISOString() });
    expect(impact.after).toMatchObject({ evaluations: 100, errors: 30, errorRate: 0.3, evaluationErrors: 10, avgLatencyMs: 10, p99LatencyMs: 10 });
    expect(impact.delta).toEqual({ errorRateDelta: 0.3, latencyP99DeltaMs: 0, evaluationsRatio: 1 });
    expect(impact.recommendation).toMatch(/roll back/i);
  });

  it('calls an unchanged flag healthy and a thin sample insufficient', async () => {
    const { key } = await toggledFlag('healthy', 1, 1);
    const healthy = await p.viewer.request('GET', `/api/flags/${key}/toggle-impact${qs({ serviceId: p.serviceId })}`);
    expect(healthy.body.impact).toMatchObject({ healthStatus: 'healthy', delta: { errorRateDelta: 0 } });

    const thin = newKey('thin');
    await createFlag(p.owner, p.serviceId, thin);
    await toggle(p.owner, thin, true);
    const res = await p.viewer.request('GET', `/api/flags/${thin}/toggle-impact${qs({ serviceId: p.serviceId })}`);
    expect(res.body.impact).toMatchObject({ healthStatus: 'insufficient_data', after: { evaluations: 0 } });
  });
});

describe('/api/flags/:key/auto-rollback', () => {
  it('GET and dryRun judge without changing anything', async () => {
    const { key } = await toggledFlag('dry', 0, 30);
    const get = await p.viewer.request('GET', `/api/flags/${key}/auto-rollback${qs({ serviceId: p.serviceId })}`);
    expectStatus(get, 200, 'auto-rollback GET');
    expect(get.headers.get('cache-control')).toBe('private, no-store');
    expectDocumented(AutoRollbackResponse, get.body);
    expect(get.body).toMatchObject({
      flagKey: key,
      serviceId: p.serviceId,
      environment: 'production',
      actionTaken: 'would_roll_back',
      tripped: true,
      targetVersionNumber: 1,
      alertNotifiedChannels: [],
    });
    expect(get.body.reason).toMatch(/error rate rose/);
    const post = await p.member.request('POST', `/api/flags/${key}/auto-rollback`, { serviceId: p.serviceId, dryRun: true });
    expectStatus(post, 200, 'auto-rollback dry run');
    expect(post.body).toMatchObject({ actionTaken: 'would_roll_back', tripped: true, targetVersionNumber: 1 });

    const flag = await p.owner.request('GET', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`);
    expect(flag.body).toMatchObject({ enabled: true, version: 2 });
  });

  it('rolls back through the flag write path and notifies the alert channels when tripped', async () => {
    const hook = uniquePath('alerts');
    const channel = await p.owner.request('POST', `/api/orgs/${p.orgId}/alert-channels`, { type: 'webhook', name: 'on-call', url: receiver.url(hook) });
    expectStatus(channel, 201, 'create alert channel');
    const { key } = await toggledFlag('trip', 0, 40);

    const res = await p.member.request('POST', `/api/flags/${key}/auto-rollback`, { serviceId: p.serviceId, environment: 'production' });
    expectStatus(res, 200, 'auto-rollback');
    expectDocumented(AutoRollbackResponse, res.body);
    expect(res.body).toMatchObject({ actionTaken: 'rolled_back', tripped: true, targetVersionNumber: 1, newVersionNumber: 3 });
    expect(res.body.alertNotifiedChannels).toEqual([{ id: channel.body.id, name: 'on-call', type: 'webhook' }]);

    const flag = await p.owner.request('GET', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`);
    expect(flag.body).toMatchObject({ enabled: false, version: 3 });
    const history = await p.owner.request('GET', `/api/flags/${key}/history${qs({ serviceId: p.serviceId, environment: 'production' })}`);
    expect(history.body.versions[0]).toMatchObject({ version: 3, changeType: 'rollback', actor: p.member.email });
    const audit = await p.owner.request('GET', `/api/audit${qs({ projectId: p.projectId, resourceId: flag.body.id, action: 'flag.update' })}`);
    expect(audit.body.logs[0].metadata).toMatchObject({ rollbackTo: 1, autoRollback: { fromVersion: 2 } });

    const delivered = await eventually(async () => receiver.received(hook).length > 0 && receiver.received(hook), 30_000);
    expect(delivered[0].rawBody).toContain(key);

    // The rollback is now the latest change (its windows still hold the failing events): never undone automatically.
    const again = await p.member.request('POST', `/api/flags/${key}/auto-rollback`, { serviceId: p.serviceId });
    expect(again.body).toMatchObject({ actionTaken: 'none', targetVersionNumber: 2, change: { version: 3, changeType: 'rollback' } });
    expect(again.body.reason).toMatch(/is a rollback/);
    expect((await p.owner.request('GET', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`)).body.version).toBe(3);
    await p.owner.request('DELETE', `/api/orgs/${p.orgId}/alert-channels/${channel.body.id}`);
  });

  it('leaves a healthy change alone and trips on latency with its own limit', async () => {
    const { key } = await toggledFlag('calm', 0, 0, 300);
    const calm = await p.member.request('POST', `/api/flags/${key}/auto-rollback`, { serviceId: p.serviceId, maxLatencyDeltaMs: 500 });
    expect(calm.body).toMatchObject({ actionTaken: 'none', tripped: false, targetVersionNumber: 1 });
    const tight = await p.member.request('GET', `/api/flags/${key}/auto-rollback${qs({ serviceId: p.serviceId, maxLatencyDeltaMs: 100 })}`);
    expect(tight.body).toMatchObject({ actionTaken: 'would_roll_back', tripped: true });
    expect(tight.body.reason).toMatch(/p99 latency rose by 290 ms/);

    const created = newKey('created');
    await createFlag(p.owner, p.serviceId, created);
    const first = await p.member.request('POST', `/api/flags/${created}/auto-rollback`, { serviceId: p.serviceId });
    expectDocumented(AutoRollbackResponse, first.body);
    expect(first.body).toMatchObject({ actionTaken: 'none', tripped: false, targetVersionNumber: null });
  });

  it('refuses callers without write access and bad bodies', async () => {
    const key = newKey('refuse');
    await createFlag(p.owner, p.serviceId, key);
    const body = { serviceId: p.serviceId };
    const path = `/api/flags/${key}/auto-rollback`;
    expect((await app.request('POST', path, { body })).status).toBe(401);
    expect((await p.viewer.request('POST', path, body)).status).toBe(403);
    expect((await other.owner.request('POST', path, body)).status).toBe(404);
    expect((await app.request('POST', path, { body, token: await opaqueToken(p.owner, p.projectId, { read: true }) })).status).toBe(403);
    expect((await app.request('POST', path, { body, token: await personalToken(p.member, 'read') })).status).toBe(403);
    expect((await app.request('POST', path, { body, token: await opaqueToken(p.owner, p.projectId, { read: true, write: true }) })).status).toBe(200);
    expect((await p.member.request('POST', path, { serviceId: p.serviceId, maxErrorRateDelta: 2 })).status).toBe(400);
    expect((await p.member.request('POST', path, { serviceId: p.serviceId, surprise: true })).status).toBe(400);
    expect((await p.member.request('POST', path, {})).status).toBe(400);
    expect((await p.member.request('POST', path, undefined, { rawBody: '{"serviceId":', headers: { 'content-type': 'application/json' } })).status).toBe(400);
    const huge = JSON.stringify({ serviceId: p.serviceId, padding: 'x'.repeat(300 * 1024) });
    expect((await p.member.request('POST', path, undefined, { rawBody: huge, headers: { 'content-type': 'application/json' } })).status).toBe(413);
  });
});

describe('GET /api/projects/:id/stale-flags', () => {
  it('scores every flag from its traffic, last change and rollout', async () => {
    const q = await createProject(app);
    const now = Date.now();
    const day = 86_400_000;
    const rolledOut = await createFlag(q.owner, q.serviceId, 'rolled-out');
    await q.owner.request('POST', `/api/flags/rolled-out/toggle${qs({ serviceId: q.serviceId, environment: 'production' })}`, { enabled: true });
    const forgotten = await createFlag(q.owner, q.serviceId, 'forgotten');
    await createFlag(q.owner, q.serviceId, 'fresh');
    const sql = app.platform.db.sql;
    await sql`UPDATE flags SET updated_at = ${new Date(now - 40 * day)} WHERE id = ${rolledOut.id}`;
    await sql`UPDATE flags SET created_at = ${new Date(now - 40 * day)}, updated_at = ${new Date(now - 40 * day)} WHERE id = ${forgotten.id}`;
    await insertEvaluations(q, 'rolled-out', [{ at: now - 2 * day - 5 * MINUTE }]);
    await insertEvaluations(q, 'fresh', [{ at: now - MINUTE }]);

    const res = await q.viewer.request('GET', `/api/projects/${q.projectId}/stale-flags`);
    expectStatus(res, 200, 'stale flags');
    expect(res.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expectDocumented(StaleFlagsResponse, res.body);
    expect(res.body).toMatchObject({ total: 3, staleCount: 1, inactiveCount: 1, launchedCount: 1, potentialTechDebtFlags: 1 });
    const byKey = Object.fromEntries(res.body.reports.map((r: { flagKey: string }) => [r.flagKey, r]));
    expect(byKey['rolled-out']).toMatchObject({
      serviceId: q.serviceId,
      environment: 'production',
      status: 'stale',
      category: 'stale_rolled_out',
      daysInactive: 2,
      daysSinceLastMutation: 40,
      rolloutPercentage: 100,
      stalenessScore: 35, // 2/60 x 50 + 40/90 x 30 + 20
    });
    expect(byKey.forgotten).toMatchObject({ status: 'inactive', category: 'inactive_disabled', daysInactive: 40, neverEvaluated: true, rolloutPercentage: 0, stalenessScore: 67 });
    expect(byKey.fresh).toMatchObject({ status: 'active', category: 'active', daysInactive: 0, daysSinceLastMutation: 0, stalenessScore: 20 });
    for (const r of res.body.reports) expect(r.recommendation.length && r.codeRemovalAdvice.length).toBeTruthy();
    expect(res.body.reports.map((r: { flagKey: string }) => r.flagKey)).toEqual(['forgotten', 'rolled-out', 'fresh']);

    expect((await app.request('GET', `/api/projects/${q.projectId}/stale-flags`)).status).toBe(401);
    expect((await other.owner.request('GET', `/api/projects/${q.projectId}/stale-flags`)).status).toBe(404);
  });
});

describe('project health and heatmap', () => {
  let q: Project;
  let idleServiceId: string;
  let now: number;

  beforeAll(async () => {
    await clearOfMinuteEdge(30_000);
    q = await createProject(app);
    const idle = await q.owner.request('POST', '/api/services', { projectId: q.projectId, name: 'zz-idle' });
    idleServiceId = idle.body.id;
    now = Date.now();
    // 10 users report an application error; 5 other evaluations failed (reported apart).
    await insertEvaluations(q, 'busy', many(100, (i) => ({ at: now - 10 * MINUTE + i, latencyMs: 20, appError: i < 10, errorCode: i >= 95 ? 'GENERAL' : undefined })));
    await insertEvaluations(q, 'quiet', many(3, (i) => ({ at: now - 40 * MINUTE + i, latencyMs: 20 })), 'staging');
    await insertEvaluations(q, 'busy', many(100, (i) => ({ at: now - 90 * MINUTE + i, latencyMs: 20 })));
  });

  it('scores the last hour and names the degraded flags', async () => {
    const res = await q.viewer.request('GET', `/api/projects/${q.projectId}/health`);
    expectStatus(res, 200, 'health');
    expect(res.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expectDocumented(HealthResponse, res.body);
    // 10 / 103 errors: errorPenalty min(50, 97.1) = 50; p99 20 ms: no latency penalty; traffic 103 vs 100: no drop.
    expect(res.body).toMatchObject({
      projectId: q.projectId,
      score: 50,
      status: 'critical',
      totalEvaluations: 103,
      previousWindowEvaluations: 100,
      scoreBreakdown: { errorPenalty: 50, latencyPenalty: 0, trafficDropPenalty: 0 },
    });
    expect(res.body.errorRate).toBeCloseTo(10 / 103, 6);
    expect(res.body.evaluationErrors).toBe(5);
    expect(res.body.services).toEqual([
      { serviceId: q.serviceId, name: 'checkout', status: 'critical', evaluations: 103, errors: 10, errorRate: expect.any(Number), evaluationErrors: 5, p99LatencyMs: 20 },
      { serviceId: idleServiceId, name: 'zz-idle', status: 'idle', evaluations: 0, errors: 0, errorRate: 0, evaluationErrors: 0, p99LatencyMs: null },
    ]);
    expect(res.body.issues).toEqual([
      expect.objectContaining({ type: 'error_rate', severity: 'critical', serviceId: q.serviceId, environment: 'production', flagKey: 'busy', value: 0.1, threshold: 0.05, evaluations: 100 }),
    ]);
    expect((await other.owner.request('GET', `/api/projects/${q.projectId}/health`)).status).toBe(404);
    expect((await app.request('GET', `/api/projects/${q.projectId}/health`)).status).toBe(401);
  });

  it('counts evaluations per flag and bucket', async () => {
    const res = await q.viewer.request('GET', `/api/projects/${q.projectId}/evaluation-heatmap`);
    expectStatus(res, 200, 'heatmap');
    expect(res.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expectDocumented(HeatmapResponse, res.body);
    const end = floorMinute(now) + MINUTE;
    const start = end - 60 * MINUTE;
    expect(res.body).toMatchObject({ projectId: q.projectId, range: { rangeLabel: '1h', minutes: 60 }, bucketMinutes: 5, totalFlags: 2, totalEvaluations: 103, maxCount: 100 });
    expect(res.body.buckets).toHaveLength(12);
    const busy = res.body.flags[0];
    expect(busy).toMatchObject({ flagKey: 'busy', serviceId: q.serviceId, total: 100 });
    expect(busy.counts[Math.floor((floorMinute(now - 10 * MINUTE) - start) / (5 * MINUTE))]).toBe(100);
    expect(res.body.flags[1]).toMatchObject({ flagKey: 'quiet', total: 3 });

    const production = await q.viewer.request('GET', `/api/projects/${q.projectId}/evaluation-heatmap${qs({ environment: 'production', range: '15m' })}`);
    expect(production.body).toMatchObject({ bucketMinutes: 1, totalFlags: 1, totalEvaluations: 100 });
    expect(production.body.buckets).toHaveLength(15);
    const week = await q.viewer.request('GET', `/api/projects/${q.projectId}/evaluation-heatmap${qs({ range: '7d', serviceId: q.serviceId })}`);
    expect(week.body).toMatchObject({ bucketMinutes: 360, totalEvaluations: 203 });
    expect(week.body.buckets).toHaveLength(28);
    const idle = await q.viewer.request('GET', `/api/projects/${q.projectId}/evaluation-heatmap${qs({ serviceId: idleServiceId })}`);
    expect(idle.body).toMatchObject({ totalFlags: 0, flags: [] });

    for (const query of [{ range: '30d' }, { range: 'week' }, { environment: 'qa' }]) {
      expect((await q.viewer.request('GET', `/api/projects/${q.projectId}/evaluation-heatmap${qs(query)}`)).status).toBe(400);
    }
    expect((await q.viewer.request('GET', `/api/projects/${q.projectId}/evaluation-heatmap${qs({ serviceId: other.serviceId })}`)).status).toBe(404);
    expect((await other.owner.request('GET', `/api/projects/${q.projectId}/evaluation-heatmap`)).status).toBe(404);
    expect((await app.request('GET', `/api/projects/${q.projectId}/evaluation-heatmap`)).status).toBe(401);
  });
});

describe('OpenAPI', () => {
  it('documents every insight route with its response body', async () => {
    const res = await app.request('GET', '/api/openapi.json');
    expectStatus(res, 200, 'openapi');
    const routes = [
      ['get', '/api/flags/{key}/metrics'],
      ['get', '/api/flags/{key}/toggle-impact'],
      ['post', '/api/flags/{key}/auto-rollback'],
      ['get', '/api/flags/{key}/auto-rollback'],
      ['get', '/api/projects/{id}/stale-flags'],
      ['get', '/api/projects/{id}/health'],
      ['get', '/api/projects/{id}/evaluation-heatmap'],
      ['get', '/api/alerts'],
    ];
    for (const [method, path] of routes) {
      expect(res.body.paths[path]?.[method]?.responses?.['200']?.content?.['application/json']?.schema).toBeDefined();
    }
  });
});

describe('GET /api/alerts', () => {
  it("evaluates every rule on each of the caller's projects", async () => {
    await clearOfMinuteEdge();
    const r = await createProject(app);
    const now = Date.now();
    // Last 5 minutes: 50 evaluations, 10 of whose users report an error, 300 ms; the hour before: 6,000 (500 per 5 minutes).
    await insertEvaluations(r, 'fragile', many(50, (i) => ({ at: now - 30_000 + i, latencyMs: 300, appError: i < 10 })));
    await insertEvaluations(r, 'fragile', many(6000, (i) => ({ at: now - 30 * MINUTE + i, latencyMs: 5 })));
    const clientErrors = many(12, (i) => ({
      timestamp: ts(now - 20_000 + i),
      project_id: r.projectId,
      service_id: r.serviceId,
      environment: 'production',
      origin: 'browser',
      fingerprint: 'f1',
      message: 'TypeError: x is undefined',
      stack: '',
      active_flags: {},
      session_id: `s${i}`,
      url: 'https://shop.example.com/',
      event_id: `ce-${r.projectId}-${i}`,
    }));
    await app.platform.analytics.client.insert({ table: 'client_errors', values: clientErrors, format: 'JSONEachRow' });

    const res = await r.viewer.request('GET', '/api/alerts');
    expectStatus(res, 200, 'alerts');
    expect(res.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expectDocumented(AlertsResponse, res.body);
    expect(res.body).toMatchObject({ status: 'firing', firingCount: 4 });
    expect(Date.parse(res.body.evaluatedAt)).toBeGreaterThanOrEqual(now);
    const byName = Object.fromEntries(res.body.alerts.map((a: { name: string }) => [a.name, a]));
    expect(byName.flag_error_rate).toMatchObject({ projectId: r.projectId, status: 'firing', severity: 'critical', value: 0.2, threshold: 0.05 });
    expect(byName.flag_error_rate.description).toContain('fragile');
    expect(byName.p99_latency).toMatchObject({ status: 'firing', severity: 'warning', threshold: 250 });
    expect(Math.abs(byName.p99_latency.value - 300)).toBeLessThanOrEqual(6);
    expect(byName.evaluation_drop).toMatchObject({ status: 'firing', value: 0.9, threshold: 0.8 });
    expect(byName.client_error_spike).toMatchObject({ status: 'firing', value: 12, threshold: 10 });
    for (const a of res.body.alerts) expect(Object.keys(a).sort()).toEqual(['description', 'name', 'projectId', 'severity', 'status', 'threshold', 'value']);

    // Another project of another user: nothing of r's, every rule resolved.
    const quiet = await other.owner.request('GET', '/api/alerts');
    expect(quiet.body).toMatchObject({ status: 'ok', firingCount: 0 });
    expect(quiet.body.alerts.every((a: { projectId: string; status: string }) => a.projectId !== r.projectId && a.status === 'resolved')).toBe(true);
    expect((await other.owner.request('GET', `/api/alerts${qs({ firing: 'true' })}`)).body.alerts).toEqual([]);

    const firing = await r.owner.request('GET', `/api/alerts${qs({ firing: 'true', projectId: r.projectId })}`);
    expect(firing.body.alerts).toHaveLength(4);
    const token = await opaqueToken(r.owner, r.projectId, { read: true });
    expect((await app.request('GET', '/api/alerts', { token })).body.firingCount).toBe(4);

    expect((await app.request('GET', '/api/alerts')).status).toBe(401);
    expect((await other.owner.request('GET', `/api/alerts${qs({ projectId: r.projectId })}`)).status).toBe(404);
    expect((await r.owner.request('GET', `/api/alerts${qs({ firing: 'yes' })}`)).status).toBe(400);
  });
});
