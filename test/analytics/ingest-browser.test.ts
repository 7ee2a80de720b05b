import { randomBytes } from 'node:crypto';
import { hashTargetingKey } from '../../api/features/evaluation/recorder';
import { startTestApp, type TestApp } from '../support/harness';
import { createProject, opaqueToken, type Project } from '../webhooks/support';

/**
 * Browser and admin ingestion (docs/api-reference.md#browser-analytics,
 * docs/analytics-ingestion.md, docs/limits.md): POST /e on the ingest listener and
 * /ingest/admin-events, what lands in ClickHouse, and every limit. One trusted proxy hop: each test
 * speaks from its own X-Forwarded-For address, so per-IP budgets do not mix.
 */

const CHROME_WINDOWS = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
const SAFARI_IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';

let app: TestApp;
let p: Project;

beforeAll(async () => {
  app = await startTestApp({ TRUST_PROXY: '1', TRUSTED_PROXIES: '127.0.0.0/8,::1/128', ADMIN_ANALYTICS_SITE_ID: 'svc_admin_custom' });
  p = await createProject(app);
});
afterAll(() => app?.stop());

let ipCounter = 0;
/** A fresh client address (TEST-NET-3) for a test's own per-IP budget. */
const freshIp = () => `203.0.113.${++ipCounter}`;

async function rows<T = Record<string, unknown>>(query: string, params: Record<string, unknown>): Promise<T[]> {
  await app.platform.analyticsWriter.flush();
  const rs = await app.platform.analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
  return rs.json<T>();
}

interface PostOptions {
  ip?: string;
  headers?: Record<string, string>;
  listener?: 'control' | 'data' | 'ingest';
}

const post = (path: string, body: unknown, opts: PostOptions = {}) =>
  app.request('POST', path, { body, listener: opts.listener ?? 'ingest', headers: { 'x-forwarded-for': opts.ip ?? freshIp(), ...opts.headers } });

const pageview = (siteId: string, extra: Record<string, unknown> = {}) => ({ type: 'pageview', siteId, url: 'https://shop.example/cart', timestamp: Date.now(), sessionId: 'sess-1', ...extra });

describe('POST {ingest_url}/e', () => {
  it('stores each valid event with server-derived browser, OS, device and country, and rejects each bad one by index', async () => {
    const siteId = p.serviceId;
    const now = Date.now();
    const res = await post(
      '/e',
      [
        pageview(siteId, { visitorId: 'visitor-1', referrer: 'https://search.example/', flags: { 'new-checkout': true }, timestamp: new Date(now - 60_000).toISOString() }),
        { type: 'webvital', siteId, url: 'https://shop.example/', timestamp: now, sessionId: 'sess-1', name: 'LCP', value: 2400, data: { rating: 'good' }, flags: { 'new-checkout': true } },
        { type: 'error', siteId, url: 'https://shop.example/', timestamp: now, sessionId: 'sess-1', data: { message: 'boom', stack: 'at a.js:1' } },
        { type: 'custom', siteId, url: 'https://shop.example/', timestamp: now, sessionId: 'sess-2', name: 'add_to_cart', value: 19.99 },
        pageview('svc_does_not_exist'),
        pageview(siteId, { sessionId: undefined }),
        pageview(siteId, { type: 'hover' }),
        pageview(siteId, { timestamp: now - 3 * 3600_000 }),
        { type: 'webvital', siteId, url: 'https://shop.example/', timestamp: now, sessionId: 's', name: 'lcp' },
        pageview(siteId, { country: 'FR' }),
        pageview(siteId, { browser: 'Netscape' }),
        { type: 'custom', siteId, url: '/', timestamp: now, sessionId: 's' },
        42,
      ],
      { headers: { 'user-agent': CHROME_WINDOWS, 'cf-ipcountry': 'de' } },
    );
    expect(res.status).toBe(202);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.body.accepted).toBe(4);
    expect(res.body.rejected).toBe(9);
    expect(res.body.errors.map((e: { index: number }) => e.index)).toEqual([4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(res.body.errors[0].message).toBe('siteId: unknown site');

    const stored = await rows<Record<string, unknown>>(
      `SELECT type, project_id, name, value, visitor_hash, referrer, flags, data, country, browser, os, device FROM browser_events WHERE service_id = {s:String} ORDER BY type`,
      { s: siteId },
    );
    const client = { project_id: p.projectId, country: 'DE', browser: 'Chrome', os: 'Windows', device: 'desktop' };
    expect(stored).toEqual([
      { ...client, type: 'custom', name: 'add_to_cart', value: 19.99, visitor_hash: '', referrer: '', flags: {}, data: '{}' },
      { ...client, type: 'error', name: '', value: null, visitor_hash: '', referrer: '', flags: {}, data: '{"message":"boom","stack":"at a.js:1"}' },
      { ...client, type: 'pageview', name: '', value: null, visitor_hash: hashTargetingKey('visitor-1'), referrer: 'https://search.example/', flags: { 'new-checkout': 'true' }, data: '{}' },
      { ...client, type: 'webvital', name: 'lcp', value: 2400, visitor_hash: '', referrer: '', flags: { 'new-checkout': 'true' }, data: '{"rating":"good"}' },
    ]);
    // Web vitals and errors reach their tables through the views.
    expect(await rows(`SELECT name, value, rating, origin FROM web_vitals WHERE service_id = {s:String}`, { s: siteId })).toEqual([
      { name: 'lcp', value: 2400, rating: 'good', origin: 'browser' },
    ]);
    expect(await rows(`SELECT message, stack, origin FROM client_errors WHERE service_id = {s:String}`, { s: siteId })).toEqual([{ message: 'boom', stack: 'at a.js:1', origin: 'browser' }]);
    const [minutes] = await rows<{ events: number }>(`SELECT sum(events) AS events FROM browser_minutes WHERE service_id = {s:String}`, { s: siteId });
    expect(Number(minutes.events)).toBe(4);
  });

  it('reads a mobile device from the User-Agent; a malformed country header is no country', async () => {
    const q = await createProject(app);
    // The header arrives through the trusted proxy, but a malformed value is not a country.
    const res = await post('/e', [pageview(q.serviceId)], { headers: { 'user-agent': SAFARI_IPHONE, 'cf-ipcountry': 'Germany' } });
    expect(res.body).toEqual({ accepted: 1, rejected: 0, errors: [] });
    const noAgent = await post('/e', [pageview(q.serviceId, { sessionId: 'sess-no-agent' })], { headers: { 'user-agent': '' } });
    expect(noAgent.body.accepted).toBe(1);
    expect(await rows(`SELECT session_id, country, browser, os, device FROM browser_events WHERE service_id = {s:String} ORDER BY session_id`, { s: q.serviceId })).toEqual([
      { session_id: 'sess-1', country: '', browser: 'Mobile Safari', os: 'iOS', device: 'mobile' },
      { session_id: 'sess-no-agent', country: '', browser: '', os: '', device: '' },
    ]);
  });

  it('answers the CORS preflight for any origin', async () => {
    const res = await app.request('OPTIONS', '/e', { listener: 'ingest', headers: { origin: 'https://shop.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-write-token' } });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-methods')).toContain('POST');
    expect(res.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('x-write-token');
    expect(res.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('content-type');
  });

  it('refuses more than 100 items, more than 100 KB, bad JSON, a non-array and other content types, with CORS headers', async () => {
    const siteId = p.serviceId;
    const many = await post('/e', Array.from({ length: 101 }, () => pageview(siteId)));
    expect(many.status).toBe(400);
    expect(many.headers.get('access-control-allow-origin')).toBe('*');
    const hundred = await post('/e', Array.from({ length: 100 }, (_, i) => pageview(siteId, { sessionId: `bulk-${i}` })));
    expect(hundred.body).toMatchObject({ accepted: 100, rejected: 0 });

    const big = await post('/e', [pageview(siteId, { data: { pad: 'x'.repeat(101 * 1024) } })]);
    expect(big.status).toBe(413);
    expect(big.headers.get('access-control-allow-origin')).toBe('*');
    const ip = freshIp();
    const malformed = await app.request('POST', '/e', { listener: 'ingest', rawBody: '[{"type":', headers: { 'content-type': 'application/json', 'x-forwarded-for': ip } });
    expect(malformed.status).toBe(400);
    expect(malformed.body.message).toBe('Malformed JSON body');
    expect((await post('/e', pageview(siteId))).status).toBe(400);
    // navigator.sendBeacon posts a string as text/plain: read as JSON; other types are refused.
    const beacon = await app.request('POST', '/e', { listener: 'ingest', rawBody: JSON.stringify([pageview(siteId)]), headers: { 'content-type': 'text/plain;charset=UTF-8', 'x-forwarded-for': ip } });
    expect(beacon.status).toBe(202);
    expect(beacon.body).toMatchObject({ accepted: 1, rejected: 0 });
    const form = await app.request('POST', '/e', { listener: 'ingest', rawBody: 'a=1', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': ip } });
    expect(form.status).toBe(415);
    // A data object over 4 KB is one rejected item, not a refused request.
    const bigData = await post('/e', [pageview(siteId, { data: { pad: 'x'.repeat(5_000) } })]);
    expect(bigData.body).toMatchObject({ accepted: 0, rejected: 1 });
  });

  it('allows 100 requests per minute per IP, then 429 with RateLimit headers; another IP is unaffected', async () => {
    const ip = freshIp();
    for (let i = 0; i < 100; i++) {
      const res = await post('/e', [], { ip });
      expect(res.status).toBe(202);
    }
    const limited = await post('/e', [pageview(p.serviceId)], { ip });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('ratelimit-limit')).toBe('100');
    expect(limited.headers.get('ratelimit-remaining')).toBe('0');
    expect(Number(limited.headers.get('ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
    expect(limited.headers.get('retry-after')).toBeTruthy();
    expect(limited.headers.get('access-control-allow-origin')).toBe('*');
    expect((await post('/e', [], { ip: freshIp() })).status).toBe(202);
  });

  it('needs X-Write-Token (a write token of the project) only for projects that require it', async () => {
    const q = await createProject(app);
    const other = await createProject(app);
    // Only project managers may turn it on.
    const byMember = await q.member.request('PATCH', `/api/projects/${q.projectId}`, { requireWriteToken: true });
    expect(byMember.status).toBe(403);
    const set = await q.admin.request('PATCH', `/api/projects/${q.projectId}`, { requireWriteToken: true });
    expect(set.status).toBe(200);
    expect(set.body.requireWriteToken).toBe(true);

    const writeToken = await opaqueToken(q.owner, q.projectId, { read: false, write: true });
    const readToken = await opaqueToken(q.owner, q.projectId, { read: true });
    const otherWrite = await opaqueToken(other.owner, other.projectId, { write: true });
    const batch = [pageview(q.serviceId), pageview(other.serviceId)];

    const without = await post('/e', batch);
    expect(without.body).toMatchObject({ accepted: 1, rejected: 1, errors: [{ index: 0, message: expect.stringContaining('X-Write-Token') }] });
    expect((await post('/e', batch, { headers: { 'x-write-token': readToken } })).body).toMatchObject({ accepted: 1, rejected: 1 });
    expect((await post('/e', batch, { headers: { 'x-write-token': otherWrite } })).body).toMatchObject({ accepted: 1, rejected: 1 });
    expect((await post('/e', batch, { headers: { 'x-write-token': writeToken } })).body).toEqual({ accepted: 2, rejected: 0, errors: [] });
    const unknown = await post('/e', batch, { headers: { 'x-write-token': 'fgk_unknown' } });
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('access-control-allow-origin')).toBe('*');

    const [n] = await rows<{ n: number }>(`SELECT count() AS n FROM browser_events WHERE service_id = {s:String}`, { s: q.serviceId });
    expect(Number(n.n)).toBe(1);
  });

  it('is served on the ingest listener only', async () => {
    expect((await post('/e', [], { listener: 'control' })).status).toBe(404);
    expect((await post('/e', [], { listener: 'data' })).status).toBe(404);
  });
});

describe('POST /ingest/admin-events', () => {
  const adminEvent = (extra: Record<string, unknown> = {}) => ({
    source: 'console',
    siteId: 'svc_admin_prod',
    sessionId: 'as-1',
    installId: 'inst-1',
    userId: 'usr_1',
    event: 'flag_viewed',
    occurredAt: new Date().toISOString(),
    appVersion: '1.4.0',
    buildNumber: '812',
    appVariant: 'web',
    platform: 'macos',
    apiOrigin: 'https://flags.example',
    ...extra,
  });

  it('stores events of the allowed site ids inside the window, project from properties.projectId, on control and ingest', async () => {
    const marker = `run-${randomBytes(3).toString('hex')}`;
    const res = await post('/ingest/admin-events', [
      adminEvent({ sessionId: marker, properties: { projectId: 'prj_funnel', screen: 'flags' } }),
      adminEvent({ sessionId: marker, siteId: 'svc_admin_custom', event: 'activation', occurredAt: Date.now() - 3_600_000 }),
      adminEvent({ sessionId: marker, siteId: 'svc_somebody_else' }),
      adminEvent({ sessionId: marker, occurredAt: new Date(Date.now() - 2 * 3600_000 - 60_000).toISOString() }),
      adminEvent({ sessionId: marker, occurredAt: Date.now() + 5 * 60_000 }),
      adminEvent({ sessionId: marker, event: 'has space' }),
    ]);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ accepted: 2, rejected: 4, siteId: 'svc_admin_prod' });
    expect(res.body.errors.map((e: { index: number; message: string }) => [e.index, e.message.split(':')[0]])).toEqual([
      [2, 'siteId'],
      [3, 'occurredAt'],
      [4, 'occurredAt'],
      [5, 'event'],
    ]);
    const onControl = await post('/ingest/admin-events', [adminEvent({ sessionId: marker, siteId: 'svc_admin_dev', event: 'screen_viewed' })], { listener: 'control' });
    expect(onControl.body).toMatchObject({ accepted: 1, rejected: 0, siteId: 'svc_admin_dev' });
    expect((await post('/ingest/admin-events', [], { listener: 'data' })).status).toBe(404);

    const stored = await rows(
      `SELECT site_id, event, project_id, user_hash, source, install_id, app_version, build_number, app_variant, platform, api_origin, properties FROM admin_events WHERE session_id = {m:String} ORDER BY event`,
      { m: marker },
    );
    const common = { user_hash: hashTargetingKey('usr_1'), source: 'console', install_id: 'inst-1', app_version: '1.4.0', build_number: '812', app_variant: 'web', platform: 'macos', api_origin: 'https://flags.example' };
    expect(stored).toEqual([
      { ...common, site_id: 'svc_admin_custom', event: 'activation', project_id: '', properties: '{}' },
      { ...common, site_id: 'svc_admin_prod', event: 'flag_viewed', project_id: 'prj_funnel', properties: '{"projectId":"prj_funnel","screen":"flags"}' },
      { ...common, site_id: 'svc_admin_dev', event: 'screen_viewed', project_id: '', properties: '{}' },
    ]);
  });

  it('refuses more than 100 events, bad JSON and oversized bodies; 100 requests per minute per IP; answers the preflight', async () => {
    const many = await post('/ingest/admin-events', Array.from({ length: 101 }, () => adminEvent()));
    expect(many.status).toBe(400);
    expect((await post('/ingest/admin-events', { events: [] })).status).toBe(400);
    const big = await post('/ingest/admin-events', [adminEvent({ properties: { pad: 'x'.repeat(101 * 1024) } })]);
    expect(big.status).toBe(413);
    const malformed = await app.request('POST', '/ingest/admin-events', { listener: 'ingest', rawBody: '[', headers: { 'content-type': 'application/json', 'x-forwarded-for': freshIp() } });
    expect(malformed.status).toBe(400);
    const none = await post('/ingest/admin-events', [adminEvent({ siteId: 'svc_nope' })]);
    expect(none.body).toMatchObject({ accepted: 0, rejected: 1, siteId: null });

    const ip = freshIp();
    for (let i = 0; i < 100; i++) expect((await post('/ingest/admin-events', [], { ip, listener: i % 2 ? 'control' : 'ingest' })).status).toBe(202);
    const limited = await post('/ingest/admin-events', [], { ip });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('ratelimit-limit')).toBe('100');
    // Browser events have their own budget.
    expect((await post('/e', [], { ip })).status).toBe(202);

    const preflight = await app.request('OPTIONS', '/ingest/admin-events', { listener: 'ingest' });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
  });
});

describe('a lone ingest process', () => {
  let ingest: TestApp;
  afterAll(() => ingest?.stop());

  it('serves /e and admin events into the shared warehouse, and neither SDK route', async () => {
    ingest = await startTestApp({ ROLES: 'ingest', DATABASE_URL: app.databaseUrl, CLICKHOUSE_DATABASE: app.platform.config.CLICKHOUSE_DATABASE });
    expect(Object.keys(ingest.running.urls)).toEqual(['management', 'ingest']);
    const q = await createProject(app);
    const browser = await ingest.request('POST', '/e', { listener: 'ingest', body: [pageview(q.serviceId, { sessionId: 'lone-ingest' })] });
    expect(browser.body).toEqual({ accepted: 1, rejected: 0, errors: [] });
    const admin = await ingest.request('POST', '/ingest/admin-events', { listener: 'ingest', body: [{ siteId: 'svc_admin_preview', event: 'screen_viewed', occurredAt: Date.now(), sessionId: 'lone-ingest' }] });
    expect(admin.body).toMatchObject({ accepted: 1, rejected: 0, siteId: 'svc_admin_preview' });
    expect((await ingest.request('POST', '/api/analytics/track', { listener: 'ingest', body: { serviceId: q.serviceId, events: [] } })).status).toBe(404);
    await ingest.platform.analyticsWriter.flush();
    expect(await rows(`SELECT count() AS n FROM browser_events WHERE service_id = {s:String} AND session_id = 'lone-ingest'`, { s: q.serviceId })).toEqual([{ n: 1 }]);
    expect(await rows(`SELECT count() AS n FROM admin_events WHERE session_id = 'lone-ingest'`, {})).toEqual([{ n: 1 }]);
  });
});
