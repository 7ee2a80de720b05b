import { startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, opaqueToken, personalToken, qs, type Project } from '../webhooks/support';
import { adminRow, browserRow, DAY, evaluationRow, HOUR, insertRows, MINUTE, outcomeRow, vitalRow, type Tenant } from './queries-fixtures';

/**
 * The analytics queries (docs/analytics.md) over known rows: exact counts, rates, funnels, cohorts,
 * boundaries, access.
 */

let app: TestApp;
let p: Project;
let other: Project;
let site: Tenant;
let impactSite: Tenant;
const now = Date.now();

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
  site = { projectId: p.projectId, serviceId: p.serviceId };
  const second = await p.owner.request('POST', '/api/services', { projectId: p.projectId, name: 'storefront' });
  expectStatus(second, 201, 'create service');
  impactSite = { projectId: p.projectId, serviceId: second.body.id };
});
afterAll(async () => {
  await app?.stop();
});

const get = (path: string, params: Record<string, string | number | undefined>, as = p.owner) => as.request('GET', path + qs(params));
const close = (actual: number | null, expected: number, tolerance: number) => {
  expect(actual).not.toBeNull();
  expect(Math.abs((actual as number) - expected)).toBeLessThanOrEqual(tolerance);
};

describe('overview and events', () => {
  beforeAll(async () => {
    const at = (minutesAgo: number, plusSeconds = 0) => now - minutesAgo * MINUTE + plusSeconds * 1000;
    await insertRows(app, 'browser_events', [
      // s1: two pageviews and a click over 20 s; s2: one pageview (a bounce); s3: pageview + scroll over 10 s.
      browserRow(site, { at: at(30), type: 'pageview', session: 's1', visitor: 'v1' }),
      browserRow(site, { at: at(30, 10), type: 'click', session: 's1', visitor: 'v1' }),
      browserRow(site, { at: at(30, 20), type: 'pageview', session: 's1', visitor: 'v1' }),
      browserRow(site, { at: at(20), type: 'pageview', session: 's2', visitor: 'v2' }),
      browserRow(site, { at: at(10), type: 'pageview', session: 's3', visitor: 'v1' }),
      browserRow(site, { at: at(10, 10), type: 'scroll', session: 's3', visitor: 'v1', data: { depth: 80 } }),
      // Just inside and just outside 24 h (3 minutes either side of the boundary).
      browserRow(site, { at: now - DAY + 3 * MINUTE, type: 'pageview', session: 's5', visitor: 'v4' }),
      browserRow(site, { at: now - DAY - 3 * MINUTE, type: 'pageview', session: 's4', visitor: 'v3' }),
    ]);
    // Another project's site: never counted here.
    await insertRows(app, 'browser_events', [browserRow({ projectId: other.projectId, serviceId: other.serviceId }, { at: at(5), type: 'pageview', session: 'x', visitor: 'x' })]);
  });

  it('counts visitors, pageviews, session duration and bounces per range, boundaries included', async () => {
    const hour = await get('/api/analytics/overview', { siteId: site.serviceId, range: '1h' });
    expect(hour.status).toBe(200);
    expect(hour.body).toEqual({ visitors: 2, pageviews: 4, avgSessionDuration: 10_000, bounceRate: 1 / 3, range: '1h' });

    const day = await get('/api/analytics/overview', { siteId: site.serviceId });
    expect(day.body).toEqual({ visitors: 3, pageviews: 5, avgSessionDuration: 7_500, bounceRate: 0.5, range: '24h' });
    expect(day.headers.get('cache-control')).toBe('private, no-cache');

    const week = await get('/api/analytics/overview', { siteId: site.serviceId, range: '7d' });
    expect(week.body).toEqual({ visitors: 4, pageviews: 6, avgSessionDuration: 6_000, bounceRate: 0.6, range: '7d' });

    const empty = await get('/api/analytics/overview', { siteId: impactSite.serviceId, range: '1h' });
    expect(empty.body).toEqual({ visitors: 0, pageviews: 0, avgSessionDuration: 0, bounceRate: 0, range: '1h' });
  });

  it('lists the latest events newest first with derived fields, limit 1-100 (default 50)', async () => {
    const latest = await get('/api/analytics/events', { siteId: site.serviceId, limit: 3 });
    expect(latest.status).toBe(200);
    expect(latest.headers.get('cache-control')).toBe('private, max-age=5');
    expect(latest.body.events.map((e: { type: string }) => e.type)).toEqual(['scroll', 'pageview', 'pageview']);
    expect(latest.body.events[0]).toEqual({
      id: expect.any(String),
      type: 'scroll',
      url: 'https://shop.example.com/',
      timestamp: new Date(now - 10 * MINUTE + 10_000).toISOString(),
      country: 'DE',
      browser: 'Firefox',
      os: 'Linux',
      device: 'desktop',
      flags: {},
      data: { depth: 80 },
    });
    const all = await get('/api/analytics/events', { siteId: site.serviceId });
    expect(all.body.events).toHaveLength(8);
    for (const limit of ['0', '101', 'many', '1.5']) expect((await get('/api/analytics/events', { siteId: site.serviceId, limit })).status).toBe(400);
  });
});

describe('vitals and flag impact', () => {
  beforeAll(async () => {
    const at = now - 30 * MINUTE;
    const lcp = Array.from({ length: 100 }, (_, i) => vitalRow(impactSite, { at, name: 'lcp', value: i + 1, flags: i < 40 ? { checkout: true } : {} }));
    await insertRows(app, 'web_vitals', [
      ...lcp,
      vitalRow(impactSite, { at, name: 'cls', value: 0.1, flags: { checkout: true } }),
      vitalRow(impactSite, { at, name: 'cls', value: 0.3, flags: { checkout: false } }),
      vitalRow(impactSite, { at, name: 'inp', value: 200, origin: 'sdk' }),
    ]);
    await insertRows(app, 'browser_events', [
      browserRow(impactSite, { at, type: 'pageview', session: 'i1', flags: { checkout: true, theme: 'dark' } }),
      browserRow(impactSite, { at: at + 1000, type: 'pageview', session: 'i1', flags: { checkout: true, theme: 'dark' } }),
      browserRow(impactSite, { at, type: 'pageview', session: 'i2', flags: { checkout: true } }),
      browserRow(impactSite, { at, type: 'pageview', session: 'i3', flags: { checkout: false } }),
      browserRow(impactSite, { at, type: 'click', session: 'i3', flags: { checkout: false } }),
    ]);
  });

  it('answers p50/p75/p95 and counts per metric within the t-digest error, every metric listed', async () => {
    const res = await get('/api/analytics/vitals', { siteId: impactSite.serviceId });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('private, max-age=30');
    const [lcp, cls, inp, ttfb, fcp] = res.body.vitals;
    expect(lcp).toMatchObject({ metric: 'lcp', count: 100 });
    close(lcp.p50, 50.5, 2);
    close(lcp.p75, 75.25, 2);
    close(lcp.p95, 95.05, 2);
    expect(cls).toMatchObject({ metric: 'cls', count: 2 });
    expect(inp).toEqual({ metric: 'inp', count: 1, p50: 200, p75: 200, p95: 200 });
    expect(ttfb).toEqual({ metric: 'ttfb', count: 0, p50: null, p75: null, p95: null });
    expect(fcp.count).toBe(0);
    expect(res.body.range).toBe('24h');
    const lcpPoints = res.body.timeSeries.filter((pt: { metric: string }) => pt.metric === 'lcp');
    expect(lcpPoints).toHaveLength(1);
    expect(lcpPoints[0].count).toBe(100);
    expect(new Date(lcpPoints[0].timestamp).getTime() % HOUR).toBe(0);
  });

  it('narrows to pages with a flag active (raw rows)', async () => {
    const res = await get('/api/analytics/vitals', { siteId: impactSite.serviceId, flagKey: 'checkout' });
    expect(res.body.vitals[0].count).toBe(40);
    close(res.body.vitals[0].p50, 20.5, 1.5);
    expect(res.body.vitals[1].count).toBe(2);
    expect(res.body.vitals[2].count).toBe(0);
  });

  it('splits pageviews, sessions, LCP p75 and CLS by flag value', async () => {
    const res = await get('/api/analytics/flag-impact', { siteId: impactSite.serviceId, range: '1h' });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('private, max-age=30');
    expect(res.body.range).toBe('1h');
    const [checkout, theme] = res.body.impact;
    expect(checkout.flagKey).toBe('checkout');
    expect(checkout.variants).toEqual([
      { variant: 'true', pageviews: 3, sessions: 2, lcpP75: expect.any(Number), avgCls: 0.1 },
      { variant: 'false', pageviews: 1, sessions: 1, lcpP75: null, avgCls: 0.3 },
    ]);
    close(checkout.variants[0].lcpP75, 30.25, 1.5);
    expect(theme).toEqual({ flagKey: 'theme', variants: [{ variant: 'dark', pageviews: 2, sessions: 1, lcpP75: null, avgCls: null }] });
  });
});

describe('sdk telemetry', () => {
  beforeAll(async () => {
    const at = now - 20 * MINUTE;
    const base = { timestamp: new Date(at).toISOString().replace('T', ' ').replace('Z', ''), project_id: site.projectId, service_id: site.serviceId, environment: 'production' };
    await insertRows(app, 'sdk_telemetry', [
      { ...base, flag_key: 'checkout', variant: 'on', evaluations: 100, cache_hits: 80, cache_misses: 20, avg_latency_ms: 2, event_id: 't1' },
      { ...base, flag_key: 'checkout', variant: 'on', evaluations: 50, cache_hits: 50, cache_misses: 0, avg_latency_ms: 4, event_id: 't2' },
      { ...base, flag_key: 'search', variant: 'v1', evaluations: 10, cache_hits: 0, cache_misses: 10, avg_latency_ms: 1, event_id: 't3' },
      { ...base, environment: 'staging', flag_key: 'search', variant: 'v1', evaluations: 7, cache_hits: 7, cache_misses: 0, avg_latency_ms: 1, event_id: 't4' },
    ]);
    await insertRows(app, 'web_vitals', [
      vitalRow(site, { at, name: 'lcp', value: 1000, rating: 'good', origin: 'sdk' }),
      vitalRow(site, { at, name: 'lcp', value: 3000, rating: 'needs-improvement', origin: 'sdk' }),
      vitalRow(site, { at, name: 'lcp', value: 5000, rating: 'poor', origin: 'sdk', flags: { checkout: 'on' } }),
    ]);
    const error = (message: string, fingerprint: string, flags: Record<string, string>, minutesAgo: number) => ({
      ...base,
      timestamp: new Date(now - minutesAgo * MINUTE).toISOString().replace('T', ' ').replace('Z', ''),
      origin: 'sdk',
      fingerprint,
      message,
      stack: '',
      active_flags: flags,
      session_id: '',
      url: '',
      event_id: `${fingerprint}-${minutesAgo}`,
    });
    await insertRows(app, 'client_errors', [
      error('TypeError: x is undefined', 'f1', { checkout: '"on"' }, 30),
      error('TypeError: x is undefined', 'f1', { checkout: '"on"' }, 20),
      error('TypeError: x is undefined', 'f1', { search: '"v1"', checkout: '"on"' }, 10),
      error('boom', 'f2', {}, 15),
    ]);
  });

  it('sums summaries, weighs latency, reports vitals ratings and top errors with their flags', async () => {
    const res = await get('/api/analytics/sdk-telemetry', { serviceId: site.serviceId, environment: 'production' });
    expect(res.status).toBe(200);
    expect(res.body.range).toBe('24h');
    expect(res.body.totalEvaluations).toBe(160);
    expect(res.body.cacheHitRatio).toBe(130 / 160);
    expect(res.body.evaluationSummaries).toEqual([
      { flagKey: 'checkout', variant: 'on', evaluations: 150, cacheHits: 130, cacheMisses: 20, cacheHitRatio: 130 / 150, avgLatencyMs: expect.closeTo(400 / 150, 9) },
      { flagKey: 'search', variant: 'v1', evaluations: 10, cacheHits: 0, cacheMisses: 10, cacheHitRatio: 0, avgLatencyMs: 1 },
    ]);
    expect(res.body.webVitals).toEqual([{ metric: 'lcp', count: 3, p75: expect.any(Number), ratings: { good: 1, 'needs-improvement': 1, poor: 1 } }]);
    expect(res.body.webVitals[0].p75).toBeGreaterThanOrEqual(3000);
    expect(res.body.webVitals[0].p75).toBeLessThanOrEqual(5000);
    expect(res.body.topErrors).toEqual([
      {
        message: 'TypeError: x is undefined',
        count: 3,
        firstSeen: new Date(now - 30 * MINUTE).toISOString(),
        lastSeen: new Date(now - 10 * MINUTE).toISOString(),
        correlatedFlags: ['checkout', 'search'],
      },
      { message: 'boom', count: 1, firstSeen: expect.any(String), lastSeen: expect.any(String), correlatedFlags: [] },
    ]);
  });

  it('filters by flag and environment; without serviceId reads only the projects the caller may read', async () => {
    const search = await get('/api/analytics/sdk-telemetry', { serviceId: site.serviceId, flagKey: 'search' });
    expect(search.body.totalEvaluations).toBe(17);
    expect(search.body.cacheHitRatio).toBe(7 / 17);
    expect(search.body.webVitals).toEqual([]);
    expect(search.body.topErrors.map((e: { count: number }) => e.count)).toEqual([1]);
    const checkout = await get('/api/analytics/sdk-telemetry', { serviceId: site.serviceId, flagKey: 'checkout' });
    expect(checkout.body.webVitals).toEqual([{ metric: 'lcp', count: 1, p75: 5000, ratings: { good: 0, 'needs-improvement': 0, poor: 1 } }]);

    const everything = await get('/api/analytics/sdk-telemetry', {});
    expect(everything.body.totalEvaluations).toBe(167);
    const stranger = await get('/api/analytics/sdk-telemetry', {}, other.owner);
    expect(stranger.body).toMatchObject({ totalEvaluations: 0, evaluationSummaries: [], topErrors: [] });
    expect((await get('/api/analytics/sdk-telemetry', { range: '30d' })).status).toBe(400);
  });
});

describe('admin funnel and adoption cohorts', () => {
  beforeAll(async () => {
    const at = (hoursAgo: number) => now - hoursAgo * HOUR;
    const row = (u: string, event: string, hoursAgo: number) => adminRow(p.projectId, { user: u, event, at: at(hoursAgo) });
    await insertRows(app, 'admin_events', [
      row('A', 'screen_viewed', 5), row('A', 'flag_viewed', 4), row('A', 'activation', 3),
      row('B', 'screen_viewed', 5), row('B', 'flag_viewed', 4),
      // C skips flag_viewed; D starts in the middle; E repeats steps.
      row('C', 'screen_viewed', 5), row('C', 'activation', 4),
      row('D', 'flag_viewed', 4),
      row('E', 'screen_viewed', 6), row('E', 'screen_viewed', 5.5), row('E', 'flag_viewed', 5), row('E', 'flag_viewed', 4.5), row('E', 'activation', 2),
      row('F', 'screen_viewed', 8 * 24),
      adminRow(other.projectId, { user: 'A', event: 'activation', at: at(1) }),
    ]);
  });

  it('follows users through the ordered steps (skips end the chain, repeats do not) with the median cycle time', async () => {
    const res = await get('/api/analytics/admin-funnel', { projectId: p.projectId });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('private, max-age=30');
    expect(res.body).toEqual({
      projectId: p.projectId,
      range: '7d',
      funnel: {
        steps: [
          { event: 'screen_viewed', users: 4, conversionRate: 1, dropOffRate: 0 },
          { event: 'flag_viewed', users: 3, conversionRate: 0.75, dropOffRate: 0.25 },
          { event: 'activation', users: 2, conversionRate: 0.5, dropOffRate: 1 - 2 / 3 },
        ],
      },
      experimentCycleTime: { sampleSize: 2, medianHours: 2 },
    });
    const month = await get('/api/analytics/admin-funnel', { projectId: p.projectId, range: '30d' });
    expect(month.body.funnel.steps.map((s: { users: number }) => s.users)).toEqual([5, 3, 2]);
    expect(month.body.funnel.steps[1].conversionRate).toBe(0.6);
    const empty = await get('/api/analytics/admin-funnel', { projectId: other.projectId }, other.owner);
    expect(empty.body.experimentCycleTime).toEqual({ sampleSize: 0, medianHours: null });
    expect(empty.body.funnel.steps[2]).toEqual({ event: 'activation', users: 0, conversionRate: 0, dropOffRate: 0 });
  });

  it('checks projectSlug against projectId', async () => {
    const [{ slug }] = await app.platform.db.sql<{ slug: string }[]>`SELECT slug FROM projects WHERE id = ${p.projectId}`;
    expect((await get('/api/analytics/admin-funnel', { projectId: p.projectId, projectSlug: slug })).status).toBe(200);
    expect((await get('/api/analytics/admin-funnel', { projectId: p.projectId, projectSlug: 'not-this-one' })).status).toBe(404);
    expect((await get('/api/analytics/adoption-cohorts', { projectId: p.projectId, projectSlug: 'not-this-one' })).status).toBe(404);
  });

  it('groups the organization’s projects by creation week and counts those with evaluation traffic', async () => {
    const founder = await app.signup({ verified: true });
    const make = async (name: string) => {
      const res = await founder.request('POST', '/api/projects', { name });
      expectStatus(res, 201, 'create project');
      return res.body.id as string;
    };
    const fresh = await make('Fresh');
    await make('Idle');
    const older = await make('Older');
    await app.platform.db.sql`UPDATE projects SET created_at = ${new Date(now - 10 * DAY)} WHERE id = ${older}`;
    await insertRows(app, 'evaluation_events', [
      evaluationRow({ projectId: fresh, serviceId: 'svc' }, { at: now - HOUR, flagKey: 'f', value: true }),
      evaluationRow({ projectId: older, serviceId: 'svc' }, { at: now - 9 * DAY, flagKey: 'f', value: true }),
    ]);
    const res = await get('/api/analytics/adoption-cohorts', { projectId: fresh }, founder);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('private, max-age=60');
    expect(res.body.range).toBe('30d');
    const weeks = res.body.cohorts as { week: string; createdProjects: number; adoptedProjects: number; adoptionRate: number }[];
    for (const w of weeks) expect(new Date(w.week).getUTCDay()).toBe(1);
    expect(weeks.length).toBeGreaterThanOrEqual(5);
    const weekOf = (ms: number) => weeks.find((w) => new Date(w.week).getTime() <= ms && ms < new Date(w.week).getTime() + 7 * DAY);
    expect(weekOf(now)).toMatchObject({ createdProjects: 2, adoptedProjects: 1, adoptionRate: 0.5 });
    expect(weekOf(now - 10 * DAY)).toMatchObject({ createdProjects: 1, adoptedProjects: 1, adoptionRate: 1 });
    expect(weeks.reduce((n, w) => n + w.createdProjects, 0)).toBe(3);

    const week = await get('/api/analytics/adoption-cohorts', { projectId: fresh, range: '7d' }, founder);
    expect(week.body.cohorts.reduce((n: number, w: { createdProjects: number }) => n + w.createdProjects, 0)).toBe(2);
    // Another organization's projects are never counted.
    const theirs = await get('/api/analytics/adoption-cohorts', { projectId: p.projectId });
    expect(theirs.body.cohorts.reduce((n: number, w: { createdProjects: number }) => n + w.createdProjects, 0)).toBe(1);
    expect((await get('/api/analytics/adoption-cohorts', { projectId: fresh, range: '1y' }, founder)).status).toBe(400);
  });
});

describe('flag variants and funnels', () => {
  const flag = 'checkout-v2';
  beforeAll(async () => {
    const at = (minutesAgo: number) => now - minutesAgo * MINUTE;
    const ev = (u: string, value: unknown, minutesAgo: number, latencyMs: number, environment = 'production') =>
      evaluationRow(site, { at: at(minutesAgo), flagKey: flag, value, user: u, latencyMs, environment });
    await insertRows(app, 'evaluation_events', [
      ev('u1', true, 50, 2), ev('u2', true, 50, 4), ev('u3', true, 50, 6),
      ev('u4', true, 50, 10), ev('u4', false, 40, 10), ev('u5', false, 50, 10),
      ev('u6', true, 50, 1, 'staging'),
      ev('u7', true, 120, 3),
      // u8 is served true by the other service and false by this one: its event here counts for false.
      evaluationRow(impactSite, { at: at(45), flagKey: flag, value: true, user: 'u8', latencyMs: 10 }),
      ev('u8', false, 50, 10),
      // The funnel's flag: f4 has no `flags` on its events, so its value comes from here.
      evaluationRow(site, { at: at(200), flagKey: 'banner', value: 'b', user: 'f4' }),
    ]);
    const out = (u: string, event: string, minutesAgo: number, extra: { value?: number; flags?: Record<string, unknown>; environment?: string } = {}) =>
      outcomeRow(site, { at: at(minutesAgo), event, user: u, ...extra });
    await insertRows(app, 'outcome_events', [
      // u1's event names the flag: its value wins over the last evaluation (true).
      out('u1', 'purchase', 30, { value: 10, flags: { [flag]: false } }),
      out('u2', 'purchase', 30, { value: 20 }),
      out('u3', 'purchase', 30),
      out('u4', 'purchase', 30, { value: 40 }),
      out('u5', 'signup', 30),
      out('u2', 'error', 30),
      out('u2', 'latency', 30, { value: 100 }),
      out('u9', 'purchase', 30, { value: 99 }),
      out('u6', 'purchase', 30, { value: 5, environment: 'staging' }),
      out('u7', 'purchase', 119),
      out('u8', 'purchase', 30),
    ]);
    const step = (u: string, event: string, minutesAgo: number, flags?: Record<string, unknown>) => out(u, event, minutesAgo, { flags });
    await insertRows(app, 'outcome_events', [
      step('f1', 'view', 180, { banner: 'a' }), step('f1', 'cart', 170, { banner: 'a' }), step('f1', 'buy', 160, { banner: 'a' }),
      step('f2', 'view', 180, { banner: 'a' }), step('f2', 'buy', 160, { banner: 'a' }),
      step('f3', 'view', 180, { banner: 'b' }), step('f3', 'view', 175, { banner: 'b' }), step('f3', 'cart', 170), step('f3', 'cart', 165), step('f3', 'buy', 160),
      step('f4', 'cart', 180), step('f4', 'view', 170),
      step('f5', 'view', 180), step('f5', 'cart', 170),
      step('f6', 'buy', 180, { banner: 'a' }),
      step('f7', 'view', 180, { banner: 'a' }), step('f7', 'cart', 170, { banner: 'b' }),
    ]);
  });

  it('counts evaluations, attributed conversions, mean values and latency per value', async () => {
    const res = await get(`/api/analytics/flags/${flag}/variants`, { projectId: p.projectId, environment: 'production', period: '1h' });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('private, max-age=30');
    const [on, off] = res.body.variants;
    expect(res.body).toMatchObject({ flagKey: flag, environment: 'production', period: '1h', totalEvaluations: 8, totalConversions: 6, overallConversionRate: 6 / 8 });
    expect(on).toMatchObject({ variant: 'true', evaluations: 5, conversions: 2, conversionRate: 0.4, avgEventValue: 20 });
    expect(off).toMatchObject({ variant: 'false', evaluations: 3, conversions: 4, conversionRate: 4 / 3, avgEventValue: 25, latencyP50: 10, latencyP99: 10 });
    close(on.latencyP50, 6, 2.01);
    close(on.latencyP99, 10, 0.5);
  });

  it('filters the conversion event, and the period bounds evaluations and conversions alike', async () => {
    const purchase = await get(`/api/analytics/flags/${flag}/variants`, { projectId: p.projectId, environment: 'production', period: '1h', eventName: 'purchase' });
    expect(purchase.body.variants.map((v: { variant: string; conversions: number; avgEventValue: number | null }) => [v.variant, v.conversions, v.avgEventValue])).toEqual([
      ['true', 2, 20],
      ['false', 3, 25],
    ]);
    expect(purchase.body.overallConversionRate).toBe(5 / 8);
    const day = await get(`/api/analytics/flags/${flag}/variants`, { projectId: p.projectId, environment: 'production', serviceId: site.serviceId });
    expect(day.body.period).toBe('24h');
    expect(day.body.variants[0]).toMatchObject({ variant: 'true', evaluations: 5, conversions: 3 });
    const staging = await get(`/api/analytics/flags/${flag}/variants`, { projectId: p.projectId, environment: 'staging' });
    expect(staging.body).toMatchObject({ totalEvaluations: 1, totalConversions: 1 });
    const elsewhere = await get(`/api/analytics/flags/${flag}/variants`, { projectId: p.projectId, environment: 'production', serviceId: impactSite.serviceId });
    expect(elsewhere.body).toMatchObject({ totalEvaluations: 1, totalConversions: 0, overallConversionRate: 0 });
    // No conversion in one evaluation: the Wilson 95% interval is [0, 0.79].
    expect(elsewhere.body.variants).toEqual([
      { variant: 'true', evaluations: 1, conversions: 0, conversionRate: 0, conversionInterval: { low: 0, high: expect.closeTo(0.7935, 4) }, avgEventValue: null, latencyP50: 10, latencyP99: 10 },
    ]);
  });

  it('builds the ordered funnel per user and value (skips, repeats, wrong order, unattributed users)', async () => {
    const res = await get('/api/analytics/funnel', { projectId: p.projectId, flagKey: 'banner', steps: 'view,cart,buy', environment: 'production' });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('private, max-age=30');
    expect(res.body).toEqual({
      projectId: p.projectId,
      flagKey: 'banner',
      steps: ['view', 'cart', 'buy'],
      funnelSteps: [
        { step: 'view', stepIndex: 0, totalUsers: 5, byVariant: { a: 3, b: 2 }, dropOffRate: 0 },
        { step: 'cart', stepIndex: 1, totalUsers: 3, byVariant: { a: 2, b: 1 }, dropOffRate: 1 - 3 / 5 },
        { step: 'buy', stepIndex: 2, totalUsers: 2, byVariant: { a: 1, b: 1 }, dropOffRate: 1 - 2 / 3 },
      ],
      variants: ['a', 'b'],
      overallConversionRate: 2 / 5,
    });
    const hour = await get('/api/analytics/funnel', { projectId: p.projectId, flagKey: 'banner', steps: 'view,cart,buy', environment: 'production', period: '1h' });
    expect(hour.body.funnelSteps[0]).toEqual({ step: 'view', stepIndex: 0, totalUsers: 0, byVariant: {}, dropOffRate: 0 });
    expect(hour.body.overallConversionRate).toBe(0);
  });

  it('validates steps, environment and period', async () => {
    const base = { projectId: p.projectId, flagKey: 'banner', environment: 'production' };
    for (const steps of ['view', 'view,view', 'view,bad step', Array.from({ length: 11 }, (_, i) => `s${i}`).join(','), 'x'.repeat(2000)]) {
      expect((await get('/api/analytics/funnel', { ...base, steps })).status).toBe(400);
    }
    expect((await get('/api/analytics/funnel', { ...base, steps: 'view,cart', period: '2h' })).status).toBe(400);
    expect((await get('/api/analytics/funnel', { ...base, steps: 'view,cart', environment: 'prod' })).status).toBe(400);
    expect((await get(`/api/analytics/flags/${flag}/variants`, { projectId: p.projectId })).status).toBe(400);
    expect((await get(`/api/analytics/flags/${flag}/variants`, { projectId: p.projectId, environment: 'production', eventName: 'no spaces' })).status).toBe(400);
    // A service of another project is not one of this project's.
    expect((await get(`/api/analytics/flags/${flag}/variants`, { projectId: p.projectId, environment: 'production', serviceId: other.serviceId })).status).toBe(404);
    expect((await get('/api/analytics/funnel', { ...base, steps: 'view,cart', serviceId: other.serviceId })).status).toBe(404);
  });
});

describe('who may read analytics', () => {
  const endpoints = () => [
    ['/api/analytics/overview', { siteId: site.serviceId }],
    ['/api/analytics/vitals', { siteId: site.serviceId }],
    ['/api/analytics/flag-impact', { siteId: site.serviceId }],
    ['/api/analytics/events', { siteId: site.serviceId }],
    ['/api/analytics/admin-funnel', { projectId: p.projectId }],
    ['/api/analytics/adoption-cohorts', { projectId: p.projectId }],
    ['/api/analytics/flags/checkout/variants', { projectId: p.projectId, environment: 'production' }],
    ['/api/analytics/funnel', { projectId: p.projectId, flagKey: 'banner', steps: 'view,cart', environment: 'production' }],
  ] as const;

  it('refuses anonymous callers (401) and hides other projects (404)', async () => {
    for (const [path, params] of endpoints()) {
      expect([path, (await app.request('GET', path + qs(params))).status]).toEqual([path, 401]);
      expect([path, (await get(path, params, other.owner)).status]).toEqual([path, 404]);
    }
    expect((await app.request('GET', '/api/analytics/sdk-telemetry')).status).toBe(401);
    expect((await get('/api/analytics/sdk-telemetry', { serviceId: site.serviceId }, other.owner)).status).toBe(404);
  });

  it('lets every project role, read project tokens and read personal tokens in', async () => {
    const projectToken = await opaqueToken(p.owner, p.projectId, { read: true });
    const pat = await personalToken(p.viewer, 'read');
    const foreignToken = await opaqueToken(other.owner, other.projectId, { read: true });
    for (const [path, params] of endpoints()) {
      expect([path, (await get(path, params, p.viewer)).status]).toEqual([path, 200]);
      expect([path, (await app.request('GET', path + qs(params), { token: projectToken })).status]).toEqual([path, 200]);
      expect([path, (await app.request('GET', path + qs(params), { token: pat })).status]).toEqual([path, 200]);
      expect([path, (await app.request('GET', path + qs(params), { token: foreignToken })).status]).toEqual([path, 404]);
    }
  });

  it('answers 400 to unknown ranges and malformed ids', async () => {
    for (const [path, params] of endpoints().filter(([path]) => path !== '/api/analytics/events')) {
      const key = path.includes('variants') || path === '/api/analytics/funnel' ? 'period' : 'range';
      expect([path, (await get(path, { ...params, [key]: '2w' })).status]).toEqual([path, 400]);
    }
    expect((await get('/api/analytics/overview', { siteId: 'x'.repeat(200) })).status).toBe(400);
    expect((await get('/api/analytics/overview', {})).status).toBe(400);
  });
});
