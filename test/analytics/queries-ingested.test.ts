import { untilEvaluated } from '../data-plane/support';
import { startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, expectStatus, opaqueToken, qs, type Project } from '../webhooks/support';

/**
 * The queries over rows that came in through the real producers (evaluation, track, SDK
 * telemetry, browser ingestion) and the batched writer, not inserted by hand: hashes, flag
 * value encodings and tenant columns must line up between writers and readers.
 */

let app: TestApp;
let p: Project;
let token: string;
const flagKey = 'ingested-flag';

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  token = await opaqueToken(p.owner, p.projectId, { read: true });
  await createFlag(p.owner, p.serviceId, flagKey);
});
afterAll(async () => {
  await app?.stop();
});

it('attributes tracked conversions to the value evaluation served the same targeting key', async () => {
  const served = await untilEvaluated(
    app,
    { flagKey, serviceId: p.serviceId, environment: 'production', defaultValue: true, context: { targetingKey: 'alice' } },
    (r) => r.reason !== 'FLAG_NOT_FOUND' && r.reason !== 'ERROR',
    { token },
  );
  const track = await app.request('POST', '/api/analytics/track', {
    token,
    body: {
      serviceId: p.serviceId,
      environment: 'production',
      events: [
        { event: 'purchase', targetingKey: 'alice', value: 30 },
        { event: 'purchase', targetingKey: 'bob', flags: { [flagKey]: 'blue' } },
        { event: 'error', targetingKey: 'alice' },
      ],
    },
  });
  expectStatus(track, 202, 'track');
  await app.platform.analyticsWriter.flush();

  const res = await p.viewer.request('GET', `/api/analytics/flags/${flagKey}/variants${qs({ projectId: p.projectId, environment: 'production', period: '1h' })}`);
  expect(res.status).toBe(200);
  const byVariant = Object.fromEntries(res.body.variants.map((v: { variant: string }) => [v.variant, v]));
  expect(byVariant[JSON.stringify(served.value)]).toMatchObject({ conversions: 1, avgEventValue: 30, evaluations: expect.any(Number) });
  expect(byVariant[JSON.stringify(served.value)].evaluations).toBeGreaterThanOrEqual(1);
  expect(byVariant.blue).toMatchObject({ evaluations: 0, conversions: 1, avgEventValue: null });
  expect(res.body.totalConversions).toBe(2);
});

it('reads back SDK telemetry summaries and errors', async () => {
  const posted = await app.request('POST', '/api/analytics/sdk-telemetry', {
    token,
    body: {
      serviceId: p.serviceId,
      environment: 'production',
      summaries: [{ flagKey, variant: 'on', evaluations: 10, cacheHits: 9, cacheMisses: 1, avgLatencyMs: 0.5 }],
      errors: [{ message: 'boom', activeFlags: { [flagKey]: true } }],
    },
  });
  expectStatus(posted, 200, 'telemetry');
  await app.platform.analyticsWriter.flush();
  const res = await p.owner.request('GET', `/api/analytics/sdk-telemetry${qs({ serviceId: p.serviceId, range: '1h' })}`);
  expect(res.body).toMatchObject({
    range: '1h',
    totalEvaluations: 10,
    cacheHitRatio: 0.9,
    evaluationSummaries: [{ flagKey, variant: 'on', evaluations: 10, cacheHits: 9, cacheMisses: 1, avgLatencyMs: 0.5 }],
    topErrors: [{ message: 'boom', count: 1, correlatedFlags: [flagKey] }],
  });
});

it('counts browser events from the ingest listener in the overview and the event list', async () => {
  const sent = await app.request('POST', '/e', {
    listener: 'ingest',
    headers: { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0' },
    body: [
      { type: 'pageview', siteId: p.serviceId, url: 'https://shop.example.com/', timestamp: Date.now() - 5_000, sessionId: 's1', visitorId: 'v1', flags: { [flagKey]: true } },
      { type: 'click', siteId: p.serviceId, url: 'https://shop.example.com/', timestamp: Date.now(), sessionId: 's1', visitorId: 'v1', data: { target: 'buy' } },
    ],
  });
  expectStatus(sent, 202, 'browser ingestion');
  await app.platform.analyticsWriter.flush();
  const overview = await p.owner.request('GET', `/api/analytics/overview${qs({ siteId: p.serviceId, range: '1h' })}`);
  expect(overview.body).toMatchObject({ visitors: 1, pageviews: 1, bounceRate: 0 });
  expect(overview.body.avgSessionDuration).toBeGreaterThanOrEqual(4_000);
  const events = await p.owner.request('GET', `/api/analytics/events${qs({ siteId: p.serviceId })}`);
  expect(events.body.events.map((e: { type: string }) => e.type)).toEqual(['click', 'pageview']);
  expect(events.body.events[0]).toMatchObject({ browser: 'Firefox', os: 'Linux', data: { target: 'buy' } });
  expect(events.body.events[1].flags).toEqual({ [flagKey]: true });
  const impact = await p.owner.request('GET', `/api/analytics/flag-impact${qs({ siteId: p.serviceId, range: '1h' })}`);
  expect(impact.body.impact).toEqual([{ flagKey, variants: [{ variant: 'true', pageviews: 1, sessions: 1, lcpP75: null, avgCls: null }] }]);
});
