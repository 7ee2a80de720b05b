import { hashTargetingKey } from '../../api/features/evaluation/recorder';
import { PERSONAL_TOKEN_REFUSAL } from '../../api/http/errors';
import { startTestApp, type TestApp } from '../support/harness';
import { createProject, opaqueToken, personalToken, type Project } from '../webhooks/support';

/**
 * SDK ingestion (docs/api-reference.md#outcome-events, docs/analytics-ingestion.md): track and
 * sdk-telemetry on both planes, what lands in ClickHouse, and every refusal.
 */

let app: TestApp;
let p: Project;
let other: Project;
let readToken: string;
let writeOnlyToken: string;
let otherReadToken: string;
let pat: string;

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
  readToken = await opaqueToken(p.owner, p.projectId, { read: true });
  writeOnlyToken = await opaqueToken(p.owner, p.projectId, { read: false, write: true });
  otherReadToken = await opaqueToken(other.owner, other.projectId, { read: true });
  pat = await personalToken(p.owner, 'admin');
});
afterAll(() => app?.stop());

async function rows<T = Record<string, unknown>>(query: string, params: Record<string, unknown>): Promise<T[]> {
  await app.platform.analyticsWriter.flush();
  const rs = await app.platform.analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
  return rs.json<T>();
}

const track = (body: unknown, opts: { token?: string; listener?: 'control' | 'data' | 'ingest' } = {}) =>
  app.request('POST', '/api/analytics/track', { body, token: 'token' in opts ? opts.token : readToken, listener: opts.listener });
const telemetry = (body: unknown, opts: { token?: string; listener?: 'control' | 'data' | 'ingest' } = {}) =>
  app.request('POST', '/api/analytics/sdk-telemetry', { body, token: 'token' in opts ? opts.token : readToken, listener: opts.listener });

const isoAgo = (ms: number) => new Date(Date.now() - ms).toISOString();

describe('POST /api/analytics/track', () => {
  it('stores each valid event once, hashed and attributed, and reports each bad one by index (data plane)', async () => {
    const environment = 'production';
    const res = await track(
      {
        serviceId: p.serviceId,
        environment,
        events: [
          { event: 'purchase', targetingKey: 'user-1', value: 42.5, timestamp: isoAgo(60_000), flags: { 'new-checkout': true, banner: 'blue' } },
          { event: 'latency', targetingKey: 'user-2', value: 120, timestamp: Date.now() - 1_000 },
          { event: 'signup:done', targetingKey: 'user-3' },
          { event: 'bad name!', targetingKey: 'user-4' },
          { event: 'purchase', targetingKey: 'user-5', value: '12' },
          { event: 'purchase', targetingKey: 'user-6', timestamp: isoAgo(2 * 3600_000 + 60_000) },
          { event: 'purchase', targetingKey: 'user-7', timestamp: Date.now() + 5 * 60_000 },
          { event: 'purchase' },
          { event: 'x'.repeat(65), targetingKey: 'user-9' },
          { event: 'purchase', targetingKey: 'user-10', country: 'DE' },
          'not an object',
        ],
      },
      { listener: 'data' },
    );
    expect(res.status).toBe(202);
    expect(res.body.accepted).toBe(3);
    expect(res.body.rejected).toBe(8);
    expect(res.body.errors.map((e: { index: number }) => e.index)).toEqual([3, 4, 5, 6, 7, 8, 9, 10]);
    expect(res.body.errors[2].message).toBe('timestamp: more than 2 hours old');
    expect(res.body.errors[3].message).toBe('timestamp: more than 60 seconds in the future');
    expect(res.body.errors[0].message).toMatch(/^event: /);

    const stored = await rows<{ event: string; targeting_key_hash: string; value: number | null; flags: Record<string, string>; origin: string; project_id: string; environment: string }>(
      `SELECT event, targeting_key_hash, value, flags, origin, project_id, environment FROM outcome_events WHERE service_id = {s:String} ORDER BY event`,
      { s: p.serviceId },
    );
    expect(stored).toEqual([
      { event: 'latency', targeting_key_hash: hashTargetingKey('user-2'), value: 120, flags: {}, origin: 'track', project_id: p.projectId, environment },
      { event: 'purchase', targeting_key_hash: hashTargetingKey('user-1'), value: 42.5, flags: { 'new-checkout': 'true', banner: '"blue"' }, origin: 'track', project_id: p.projectId, environment },
      { event: 'signup:done', targeting_key_hash: hashTargetingKey('user-3'), value: null, flags: {}, origin: 'track', project_id: p.projectId, environment },
    ]);
    // The rollup counts what the raw table holds.
    const [minutes] = await rows<{ events: string }>(`SELECT sum(events) AS events FROM outcome_minutes WHERE service_id = {s:String}`, { s: p.serviceId });
    expect(Number(minutes.events)).toBe(3);
  });

  it('takes the same call on the control plane; environment defaults to development and an unknown one is refused', async () => {
    const serviceId = p.serviceId;
    const res = await track({ serviceId, events: [{ event: 'default-env', targetingKey: 'u' }] });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ accepted: 1, rejected: 0, errors: [] });
    const [row] = await rows<{ environment: string }>(`SELECT environment FROM outcome_events WHERE service_id = {s:String} AND event = 'default-env'`, { s: serviceId });
    expect(row.environment).toBe('development');

    const bad = await track({ serviceId, environment: 'prod', events: [] });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/body\.environment/);
    expect((await track({ serviceId, events: [] })).body).toEqual({ accepted: 0, rejected: 0, errors: [] });
  });

  it('refuses callers as evaluation does: anonymous 401, personal tokens 403, no read 403, another project 404', async () => {
    const body = { serviceId: p.serviceId, environment: 'production', events: [{ event: 'purchase', targetingKey: 'refused-caller' }] };
    for (const listener of ['control', 'data'] as const) {
      expect((await track(body, { token: undefined, listener })).status).toBe(401);
      const personal = await track(body, { token: pat, listener });
      expect(personal.status).toBe(403);
      expect(personal.body.message).toBe(PERSONAL_TOKEN_REFUSAL);
      const writeOnly = await track(body, { token: writeOnlyToken, listener });
      expect(writeOnly.status).toBe(403);
      expect(writeOnly.body.message).toBe("Forbidden: You need 'read' permission");
      // A token of another project naming this project's service: the service is not revealed.
      const crossProject = await track(body, { token: otherReadToken, listener });
      expect(crossProject.status).toBe(404);
      expect(crossProject.body.message).toBe('Service not found');
      expect((await track({ ...body, serviceId: 'svc_missing' }, { listener })).status).toBe(404);
      expect((await track(body, { token: 'fgk_not-a-real-token', listener })).status).toBe(401);
    }
    // None of the refused calls stored anything.
    const stored = await rows(`SELECT count() AS n FROM outcome_events WHERE service_id = {s:String} AND targeting_key_hash = {u:String}`, { s: p.serviceId, u: hashTargetingKey('refused-caller') });
    expect(Number((stored[0] as { n: string }).n)).toBe(0);
  });

  it("takes a project member's session (with its CSRF token) and hides the service from other users", async () => {
    const body = { serviceId: p.serviceId, environment: 'production', events: [{ event: 'session-call', targetingKey: 'member' }] };
    const viewer = await p.viewer.request('POST', '/api/analytics/track', body);
    expect(viewer.status).toBe(202);
    expect(viewer.body.accepted).toBe(1);
    expect((await p.viewer.request('POST', '/api/analytics/track', body, { csrf: '' })).status).toBe(403);
    const stranger = await other.owner.request('POST', '/api/analytics/track', body);
    expect(stranger.status).toBe(404);
    const [n] = await rows<{ n: number }>(`SELECT count() AS n FROM outcome_events WHERE service_id = {s:String} AND event = 'session-call'`, { s: p.serviceId });
    expect(Number(n.n)).toBe(1);
  });

  it('refuses more than 1,000 events, bodies over 256 KB, malformed JSON and unknown fields', async () => {
    const serviceId = p.serviceId;
    const events = Array.from({ length: 1_001 }, (_, i) => ({ event: 'e', targetingKey: `u${i}` }));
    const tooMany = await track({ serviceId, events });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.message).toMatch(/body\.events/);
    const exactly = await track({ serviceId, events: events.slice(0, 1_000) });
    expect(exactly.status).toBe(202);
    expect(exactly.body.accepted).toBe(1_000);

    const big = await track({ serviceId, events: [{ event: 'e', targetingKey: 'x'.repeat(1024), flags: { pad: 'y'.repeat(300 * 1024) } }] });
    expect(big.status).toBe(413);
    const malformed = await app.request('POST', '/api/analytics/track', { rawBody: '{"serviceId": ', headers: { 'content-type': 'application/json' }, token: readToken });
    expect(malformed.status).toBe(400);
    expect(malformed.body.message).toBe('Malformed JSON body');
    expect((await track({ serviceId, events: [], extra: 1 })).status).toBe(400);
    expect((await track({ serviceId, events: {} })).status).toBe(400);
    expect((await track([])).status).toBe(400);
    const textPlain = await app.request('POST', '/api/analytics/track', { rawBody: JSON.stringify({ serviceId, events: [] }), headers: { 'content-type': 'text/plain' }, token: readToken });
    expect(textPlain.status).toBe(415);
  });

  it('is not served on the ingest listener', async () => {
    expect((await track({ serviceId: p.serviceId, events: [] }, { listener: 'ingest' })).status).toBe(404);
  });
});

describe('POST /api/analytics/sdk-telemetry', () => {
  it('exists where /api/sdk-config points SDKs, and stores summaries, diagnostics, web vitals and errors (errors also as outcome events)', async () => {
    const config = await app.request('GET', `/api/sdk-config?serviceId=${p.serviceId}&environment=staging`, { token: readToken, listener: 'data' });
    expect(config.status).toBe(200);
    const url = new URL(config.body.endpoints.telemetry);
    expect(url.pathname).toBe('/api/analytics/sdk-telemetry');

    const res = await app.request('POST', url.pathname, {
      token: readToken,
      listener: 'data',
      body: {
        serviceId: p.serviceId,
        environment: 'staging',
        summaries: [
          { flagKey: 'new-checkout', variant: 'on', evaluations: 120, cacheHits: 100, cacheMisses: 20, avgLatencyMs: 0.4 },
          { flagKey: 'new-checkout', variant: 'off', evaluations: 80, cacheHits: 80, cacheMisses: 0, avgLatencyMs: 0.2 },
        ],
        webVitals: [
          { name: 'LCP', value: 2300, rating: 'good', activeFlags: { 'new-checkout': 'on' }, timestamp: Date.now() - 5_000 },
          { name: 'cls', value: 0.3, rating: 'poor', timestamp: Date.now() },
          // Outside the accepted window: left out and not counted.
          { name: 'inp', value: 90, timestamp: Date.now() - 3 * 3600_000 },
        ],
        errors: [{ message: 'TypeError: x is undefined', stack: 'at checkout.js:1', activeFlags: { 'new-checkout': 'on' }, timestamp: Date.now() - 1_000 }],
        diagnostics: { totalEvaluations: 200, cacheHits: 180, cacheHitRatio: 0.9, trackedFlagsCount: 1 },
      },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, processed: { evaluations: 2, webVitals: 2, errors: 1 } });

    const s = { s: p.serviceId };
    const summaries = await rows(`SELECT flag_key, variant, evaluations, cache_hits, cache_misses, avg_latency_ms, environment FROM sdk_telemetry WHERE service_id = {s:String} ORDER BY variant`, s);
    expect(summaries).toEqual([
      { flag_key: 'new-checkout', variant: 'off', evaluations: 80, cache_hits: 80, cache_misses: 0, avg_latency_ms: 0.2, environment: 'staging' },
      { flag_key: 'new-checkout', variant: 'on', evaluations: 120, cache_hits: 100, cache_misses: 20, avg_latency_ms: 0.4, environment: 'staging' },
    ]);
    expect(await rows(`SELECT total_evaluations, cache_hits, cache_hit_ratio, tracked_flags FROM sdk_diagnostics WHERE service_id = {s:String}`, s)).toEqual([
      { total_evaluations: 200, cache_hits: 180, cache_hit_ratio: 0.9, tracked_flags: 1 },
    ]);
    expect(await rows(`SELECT name, value, rating, origin, active_flags FROM web_vitals WHERE service_id = {s:String} ORDER BY name`, s)).toEqual([
      { name: 'cls', value: 0.3, rating: 'poor', origin: 'sdk', active_flags: {} },
      { name: 'lcp', value: 2300, rating: 'good', origin: 'sdk', active_flags: { 'new-checkout': '"on"' } },
    ]);
    expect(await rows(`SELECT message, stack, fingerprint, origin, active_flags FROM client_errors WHERE service_id = {s:String}`, s)).toEqual([
      { message: 'TypeError: x is undefined', stack: 'at checkout.js:1', fingerprint: hashTargetingKey('TypeError: x is undefined'), origin: 'sdk', active_flags: { 'new-checkout': '"on"' } },
    ]);
    expect(await rows(`SELECT event, origin, flags, value, environment FROM outcome_events WHERE service_id = {s:String} AND origin = 'sdk-telemetry'`, s)).toEqual([
      { event: 'error', origin: 'sdk-telemetry', flags: { 'new-checkout': '"on"' }, value: null, environment: 'staging' },
    ]);
  });

  it('takes an empty report on the control plane and refuses bad items, oversized lists and callers as track does', async () => {
    const ok = await telemetry({ serviceId: p.serviceId });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ success: true, processed: { evaluations: 0, webVitals: 0, errors: 0 } });

    const base = { serviceId: p.serviceId, environment: 'production' };
    expect((await telemetry({ ...base, webVitals: [{ name: 'fid', value: 1 }] })).status).toBe(400);
    expect((await telemetry({ ...base, summaries: [{ flagKey: 'f', evaluations: -1 }] })).status).toBe(400);
    expect((await telemetry({ ...base, diagnostics: { totalEvaluations: 1, cacheHits: 1, cacheHitRatio: 1.5, trackedFlagsCount: 1 } })).status).toBe(400);
    expect((await telemetry({ ...base, errors: Array.from({ length: 101 }, () => ({ message: 'm' })) })).status).toBe(400);
    expect((await telemetry({ ...base, errors: [{ message: 'm'.repeat(2_049) }] })).status).toBe(400);
    expect((await telemetry({ ...base, summaries: Array.from({ length: 1_001 }, () => ({ flagKey: 'f', evaluations: 1 })) })).status).toBe(400);

    for (const listener of ['control', 'data'] as const) {
      expect((await telemetry(base, { token: undefined, listener })).status).toBe(401);
      expect((await telemetry(base, { token: pat, listener })).body.message).toBe(PERSONAL_TOKEN_REFUSAL);
      expect((await telemetry(base, { token: writeOnlyToken, listener })).status).toBe(403);
      expect((await telemetry(base, { token: otherReadToken, listener })).status).toBe(404);
    }
    const big = await telemetry({ ...base, errors: [{ message: 'm', stack: 's'.repeat(300 * 1024) }] });
    expect(big.status).toBe(413);
    // Nothing of the refused reports was stored.
    const [n] = await rows<{ n: string }>(`SELECT count() AS n FROM client_errors WHERE service_id = {s:String} AND message = 'm'`, { s: p.serviceId });
    expect(Number(n.n)).toBe(0);
  });
});

describe('when the writer is over its memory bound', () => {
  let small: TestApp;
  afterAll(() => small?.stop());

  it('answers 503 with Retry-After and how many rows it kept, never 202 for a lost row', async () => {
    small = await startTestApp({ ANALYTICS_MAX_BUFFERED: '3', ANALYTICS_FLUSH_MS: '600000', ANALYTICS_BATCH_SIZE: '1000' });
    const q = await createProject(small);
    const token = await opaqueToken(q.owner, q.projectId, { read: true });
    const events = Array.from({ length: 5 }, (_, i) => ({ event: 'purchase', targetingKey: `u${i}` }));
    const res = await small.request('POST', '/api/analytics/track', { token, body: { serviceId: q.serviceId, events } });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: 'Service Unavailable', kept: 3, retryAfter: 5 });
    expect(res.headers.get('retry-after')).toBe('5');
    expect(small.platform.analyticsWriter.stats().outcome_events.dropped).toBe(1);

    await small.platform.analyticsWriter.flush();
    const rs = await small.platform.analytics.client.query({ query: 'SELECT count() AS n FROM outcome_events WHERE service_id = {s:String}', query_params: { s: q.serviceId }, format: 'JSONEachRow' });
    expect(Number((await rs.json<{ n: string }>())[0].n)).toBe(3);
    // Room again once flushed.
    const again = await small.request('POST', '/api/analytics/track', { token, body: { serviceId: q.serviceId, events: events.slice(3) } });
    expect(again.status).toBe(202);
    expect(again.body.accepted).toBe(2);
  });
});

describe('a lone data-plane process', () => {
  let data: TestApp;
  afterAll(() => data?.stop());

  it('takes track and sdk-telemetry into the shared warehouse', async () => {
    data = await startTestApp({ ROLES: 'data', DATABASE_URL: app.databaseUrl, CLICKHOUSE_DATABASE: app.platform.config.CLICKHOUSE_DATABASE });
    // flagd's ports open with the data plane (docs/local-evaluation.md#ports).
    expect(Object.keys(data.running.urls)).toEqual(['management', 'data', 'flagd', 'flagdSync']);
    const serviceId = p.serviceId;
    const tracked = await data.request('POST', '/api/analytics/track', { listener: 'data', token: readToken, body: { serviceId, events: [{ event: 'lone-data', targetingKey: 'u' }] } });
    expect(tracked.status).toBe(202);
    expect(tracked.body.accepted).toBe(1);
    const reported = await data.request('POST', '/api/analytics/sdk-telemetry', { listener: 'data', token: readToken, body: { serviceId, summaries: [{ flagKey: 'lone-flag', evaluations: 7 }] } });
    expect(reported.body).toEqual({ success: true, processed: { evaluations: 1, webVitals: 0, errors: 0 } });
    await data.platform.analyticsWriter.flush();
    expect(await rows(`SELECT count() AS n FROM outcome_events WHERE service_id = {s:String} AND event = 'lone-data'`, { s: serviceId })).toEqual([{ n: 1 }]);
    expect(await rows(`SELECT evaluations FROM sdk_telemetry WHERE service_id = {s:String} AND flag_key = 'lone-flag'`, { s: serviceId })).toEqual([{ evaluations: 7 }]);
  });
});
