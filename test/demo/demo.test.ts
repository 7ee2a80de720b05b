import { createLogger } from '../../api/infra/logger';
import { DEMO_SEED_IDS, seedDemoService } from '../../api/features/demo/seed';
import { addService, createProjectFixture, query, type ProjectFixture } from '../flags/fixtures';
import { eventually, startTestApp, type TestApp } from '../support/harness';

const DEMO = DEMO_SEED_IDS.service;
const ENVIRONMENTS = ['development', 'staging', 'production'] as const;

let app: TestApp;
let fx: ProjectFixture;

// TRUST_PROXY=1: X-Forwarded-For names the client, so tests can write as different IPs.
beforeAll(async () => {
  app = await startTestApp({ DEMO_SEED: 'true', TRUST_PROXY: '1' });
  fx = await createProjectFixture(app, 'Regular project');
});
afterAll(() => app?.stop());

let ipCounter = 0;
/** A fresh client address, so the 2 s demo write throttle of one test does not hit the next. */
const freshIp = () => ({ 'x-forwarded-for': `10.1.${Math.floor(++ipCounter / 250)}.${ipCounter % 250}` });

const list = (params: Record<string, string | number | undefined>, headers: Record<string, string> = {}) =>
  app.request('GET', `/api/flags${query(params)}`, { headers });

const demoPatch = (flags: unknown[], headers: Record<string, string> = freshIp(), suffix = '') =>
  app.request('PATCH', `/api/flags/bulk${suffix}`, { body: { flags }, headers });

const cell = (n: number, enabled: boolean, environment = 'production', extra: Record<string, unknown> = {}) => ({
  key: `px-${n}`,
  serviceId: DEMO,
  environment,
  updates: { enabled, ...extra },
});

describe('demo seeding', () => {
  it('creates 4,096 public boolean flags px-0..px-4095 in each of the three environments, with snapshots and one audit entry', async () => {
    const sql = app.platform.db.sql;
    const perEnv = await sql<{ environment: string; n: number; public: number; boolean: number; keys: number }[]>`
      SELECT environment, count(*)::int AS n, count(*) FILTER (WHERE is_public)::int AS public,
             count(*) FILTER (WHERE type = 'boolean')::int AS boolean, count(DISTINCT key)::int AS keys
      FROM flags WHERE service_id = ${DEMO} GROUP BY environment ORDER BY environment`;
    expect(perEnv).toEqual(ENVIRONMENTS.map((environment) => ({ environment, n: 4096, public: 4096, boolean: 4096, keys: 4096 })).sort((a, b) => a.environment.localeCompare(b.environment)));
    const [range] = await sql<{ missing: number }[]>`
      SELECT count(*)::int AS missing FROM generate_series(0, 4095) n
      WHERE NOT EXISTS (SELECT 1 FROM flags WHERE service_id = ${DEMO} AND environment = 'staging' AND key = 'px-' || n)`;
    expect(range.missing).toBe(0);
    const [versions] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM flag_versions WHERE service_id = ${DEMO} AND version = 1 AND change_type = 'create'`;
    expect(versions.n).toBe(12_288);
    const [snapshot] = await sql<{ snapshot: any }[]>`SELECT snapshot FROM flag_versions WHERE service_id = ${DEMO} AND flag_key = 'px-77' AND environment = 'staging'`;
    expect(snapshot.snapshot).toMatchObject({ key: 'px-77', serviceId: DEMO, environment: 'staging', enabled: false, isPublic: true, version: 1, type: 'boolean', defaultValue: false });
    const audits = await sql`SELECT actor, resource_id, metadata FROM audit_logs WHERE action = 'demo.seed'`;
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ actor: 'system:demo-seed', resource_id: DEMO, metadata: expect.objectContaining({ flagsCreated: 12_288 }) });
    expect(app.platform.demo.isDemoService(DEMO)).toBe(true);
    expect(app.platform.demo.isDemoService(fx.serviceId)).toBe(false);
    expect(app.platform.demo.demoServiceIds()).toEqual([DEMO]);
  });

  it('is idempotent: seeding again (a restart) creates nothing and writes no audit entry', async () => {
    const result = await seedDemoService(app.platform.db.sql, createLogger('silent'));
    expect(result).toEqual({ serviceId: DEMO, created: 0 });
    const [{ n }] = await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM flags WHERE service_id = ${DEMO}`;
    expect(n).toBe(12_288);
    const audits = await app.platform.db.sql`SELECT 1 FROM audit_logs WHERE action = 'demo.seed'`;
    expect(audits).toHaveLength(1);
  });
});

describe('GET /api/demo', () => {
  it('lists the demo services with their environments, without authentication', async () => {
    const res = await app.request('GET', '/api/demo');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ services: [{ serviceId: DEMO, environments: ['development', 'staging', 'production'] }] });
  });
});

describe('demo list (GET /api/flags on a demo service)', () => {
  it('serves 4,096 flags without authentication or projectId, with a fields projection and a weak ETag', async () => {
    const res = await list({ serviceId: DEMO, environment: 'development', limit: 4096, fields: 'key,enabled' });
    expect(res.status).toBe(200);
    expect(res.body.flags).toHaveLength(4096);
    expect(res.body).toMatchObject({ total: 4096, limit: 4096, offset: 0, hasMore: false, nextCursor: null, prevCursor: null });
    for (const flag of res.body.flags) expect(Object.keys(flag).sort()).toEqual(['enabled', 'key']);
    expect(new Set(res.body.flags.map((f: { key: string }) => f.key)).size).toBe(4096);
    expect(res.headers.get('etag')).toMatch(/^W\/"[^"]+"$/);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
  });

  it('answers 304 with an empty body to a matching If-None-Match (also inside a list of tags), 200 otherwise', async () => {
    const params = { serviceId: DEMO, environment: 'staging', limit: 4096, fields: 'key,enabled' };
    const first = await list(params);
    const etag = first.headers.get('etag')!;
    const again = await list(params, { 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    expect(again.headers.get('etag')).toBe(etag);
    expect((await list(params, { 'if-none-match': `W/"other", ${etag}` })).status).toBe(304);
    expect((await list(params, { 'if-none-match': etag.replace(/^W\//, '') })).status).toBe(304);
    const stale = await list(params, { 'if-none-match': 'W/"not-it"' });
    expect(stale.status).toBe(200);
    expect(stale.body.flags).toHaveLength(4096);
    // Another projection is another representation: another tag.
    const other = await list({ ...params, fields: 'key' }, { 'if-none-match': etag });
    expect(other.status).toBe(200);
    expect(other.headers.get('etag')).not.toBe(etag);
  });

  it('keeps the default page size of 50, caps the page at 4,096 and pages with offset and cursors', async () => {
    const byDefault = await list({ serviceId: DEMO, environment: 'production' });
    expect(byDefault.status).toBe(200);
    expect(byDefault.body.flags).toHaveLength(50);
    expect(byDefault.body).toMatchObject({ total: 4096, limit: 50, hasMore: true });
    expect(byDefault.body.flags[0]).toMatchObject({ serviceId: DEMO, environment: 'production', type: 'boolean', isPublic: true });

    const capped = await list({ serviceId: DEMO, limit: 10_000 });
    expect(capped.body.limit).toBe(4096);
    expect(capped.body.flags).toHaveLength(4096);
    expect(capped.body.total).toBe(12_288);

    const offset = await list({ serviceId: DEMO, environment: 'production', limit: 10, offset: 10, fields: 'key' });
    expect(offset.body.flags).toEqual(byDefault.body.flags.slice(10, 20).map((f: { key: string }) => ({ key: f.key })));
    const next = await list({ serviceId: DEMO, environment: 'production', limit: 10, cursor: offset.body.nextCursor, fields: 'key' });
    expect(next.status).toBe(200);
    expect(next.body.flags).toEqual(byDefault.body.flags.slice(20, 30).map((f: { key: string }) => ({ key: f.key })));
    expect(next.headers.get('etag')).toMatch(/^W\//);
  });

  it('applies the list filters on a demo service too', async () => {
    const res = await list({ serviceId: DEMO, environment: 'development', search: 'px-409', fields: 'key' });
    expect(res.status).toBe(200);
    expect(res.body.flags.map((f: { key: string }) => f.key).sort()).toEqual(['px-409', 'px-4090', 'px-4091', 'px-4092', 'px-4093', 'px-4094', 'px-4095']);
    const typed = await list({ serviceId: DEMO, environment: 'development', type: 'string' });
    expect(typed.body).toMatchObject({ flags: [], total: 0 });
  });

  it('refuses unknown fields (400) and keeps non-demo lists authenticated with projectId required', async () => {
    expect((await list({ serviceId: DEMO, fields: 'key,secret' })).status).toBe(400);
    expect((await list({ serviceId: fx.serviceId, limit: 10 })).status).toBe(401);
    expect((await list({ projectId: fx.projectId, serviceId: fx.serviceId })).status).toBe(401);
    expect((await list({})).status).toBe(401);
    const noProject = await fx.owner.request('GET', `/api/flags${query({ serviceId: fx.serviceId })}`);
    expect(noProject.status).toBe(400);
    expect(noProject.body.details).toEqual([{ path: 'query.projectId', message: 'Required' }]);
    // Another project named with the demo service is an ordinary list of that project: no demo flags leak into it.
    const mixed = await fx.owner.request('GET', `/api/flags${query({ projectId: fx.projectId, serviceId: DEMO })}`);
    expect(mixed.status).toBe(200);
    expect(mixed.body.flags).toEqual([]);
    expect((await list({ projectId: fx.projectId, serviceId: DEMO })).status).toBe(401);
    // A normal list keeps its own cap of 100.
    const normal = await fx.owner.request('GET', `/api/flags${query({ projectId: fx.projectId, limit: 4096 })}`);
    expect(normal.body.limit).toBe(100);
  });

  it('changes the ETag after a change made anywhere (the bus invalidates the cached grid)', async () => {
    const params = { serviceId: DEMO, environment: 'development', limit: 4096, fields: 'key,enabled' };
    const before = await list(params);
    const etag = before.headers.get('etag')!;
    expect((await list(params, { 'if-none-match': etag })).status).toBe(304);
    // A regular toggle through the flags API by a member of the demo project (not a demo write).
    const member = await app.signup();
    await app.platform.db.sql`INSERT INTO project_members (project_id, user_id, role) VALUES (${DEMO_SEED_IDS.project}, ${member.id}, 'member')`;
    const toggled = await member.request('POST', `/api/flags/px-5/toggle${query({ serviceId: DEMO, environment: 'development' })}`);
    expect(toggled.status).toBe(200);
    const after = await eventually(async () => {
      const res = await list(params, { 'if-none-match': etag });
      return res.status === 200 ? res : undefined;
    });
    expect(after.headers.get('etag')).not.toBe(etag);
    expect(after.body.flags.find((f: { key: string }) => f.key === 'px-5')).toEqual({ key: 'px-5', enabled: true });
  });

  it('drops the cached grid when a flag is created or deleted in the demo service', async () => {
    const admin = await app.signup();
    await app.platform.db.sql`INSERT INTO project_members (project_id, user_id, role) VALUES (${DEMO_SEED_IDS.project}, ${admin.id}, 'admin')`;
    const params = { serviceId: DEMO, environment: 'staging', limit: 4096, fields: 'key' };
    expect((await list(params)).body.total).toBe(4096);
    const created = await admin.request('POST', '/api/flags', { key: 'extra-cell', serviceId: DEMO, environment: 'staging', isPublic: true });
    expect(created.status).toBe(201);
    await eventually(async () => (await list(params)).body.total === 4097);
    const removed = await admin.request('DELETE', `/api/flags/extra-cell${query({ serviceId: DEMO, environment: 'staging' })}`);
    expect(removed.status).toBe(204);
    await eventually(async () => (await list(params)).body.total === 4096);
  });
});

describe('demo writes (PATCH /api/flags/bulk on demo services)', () => {
  it('runs without credential or CSRF, applies only updates.enabled and records public-demo', async () => {
    const res = await demoPatch([cell(100, true, 'production', { name: 'hijacked', isPublic: false, defaultValue: true }), cell(101, true)]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, total: 2, succeeded: 2, failed: 0 });
    expect(res.body.results[0]).toMatchObject({ index: 0, key: 'px-100', status: 'success', flag: { key: 'px-100', enabled: true, name: 'px-100', isPublic: true, defaultValue: false, version: 2 } });

    const [row] = await app.platform.db.sql`SELECT enabled, name, is_public, default_value, version FROM flags WHERE service_id = ${DEMO} AND environment = 'production' AND key = 'px-100'`;
    expect(row).toEqual({ enabled: true, name: 'px-100', is_public: true, default_value: false, version: 2 });

    const audit = await app.platform.db.sql`
      SELECT actor, user_id, action, ip_address, changes, metadata FROM audit_logs WHERE resource_name = 'px-100' AND action = 'flag.toggle'`;
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      actor: 'public-demo',
      user_id: null,
      changes: [{ field: 'enabled', oldValue: false, newValue: true }],
      metadata: expect.objectContaining({ demo: true, environment: 'production', version: 2 }),
    });
    expect(audit[0].ip_address).toMatch(/^10\.1\./);
    const events = await app.platform.db.sql`
      SELECT event, payload FROM flag_outbox WHERE service_id = ${DEMO} AND environment = 'production' AND flag_key = 'px-100'`;
    expect(events).toHaveLength(1);
    expect(events[0].event).toBe('flag.toggled');
    expect(events[0].payload).toMatchObject({ actor: 'public-demo', actorUserId: null, data: { changes: { enabled: { from: false, to: true } } }, flag: { enabled: true } });
  });

  it('shows public-demo in the audit log and the flag history over the API', async () => {
    const viewer = await app.signup();
    await app.platform.db.sql`INSERT INTO project_members (project_id, user_id, role) VALUES (${DEMO_SEED_IDS.project}, ${viewer.id}, 'viewer')`;
    expect((await demoPatch([cell(102, true, 'staging')])).status).toBe(200);
    const history = await viewer.request('GET', `/api/flags/px-102/history${query({ serviceId: DEMO, environment: 'staging' })}`);
    expect(history.status).toBe(200);
    expect(history.body.versions[0]).toMatchObject({ version: 2, changeType: 'toggle', actor: 'public-demo', userId: null, snapshot: { enabled: true } });
    const audit = await viewer.request('GET', `/api/audit${query({ projectId: DEMO_SEED_IDS.project, action: 'flag.toggle', resourceId: history.body.versions[0].snapshot.id })}`);
    expect(audit.status).toBe(200);
    expect(audit.body.logs).toHaveLength(1);
    expect(audit.body.logs[0]).toMatchObject({ actor: 'public-demo', userId: null, action: 'flag.toggle', resourceName: 'px-102' });
  });

  it('changes the list ETag at once for the writing replica', async () => {
    const params = { serviceId: DEMO, environment: 'production', limit: 4096, fields: 'key,enabled' };
    const etag = (await list(params)).headers.get('etag')!;
    expect((await demoPatch([cell(200, true)])).status).toBe(200);
    const after = await list(params, { 'if-none-match': etag });
    expect(after.status).toBe(200);
    expect(after.body.flags.find((f: { key: string }) => f.key === 'px-200')).toEqual({ key: 'px-200', enabled: true });
  });

  it('allows one write per IP every 2 seconds (429 with Retry-After), independently per IP', async () => {
    const ip = freshIp();
    expect((await demoPatch([cell(300, true)], ip)).status).toBe(200);
    const throttled = await demoPatch([cell(301, true)], ip);
    expect(throttled.status).toBe(429);
    expect(throttled.body).toMatchObject({ error: 'Too Many Requests', message: expect.stringContaining('2 seconds') });
    expect(throttled.headers.get('retry-after')).toBe('2');
    const [untouched] = await app.platform.db.sql`SELECT enabled FROM flags WHERE service_id = ${DEMO} AND environment = 'production' AND key = 'px-301'`;
    expect(untouched.enabled).toBe(false);
    expect((await demoPatch([cell(302, true)], freshIp())).status).toBe(200);
    await new Promise((r) => setTimeout(r, 2100));
    expect((await demoPatch([cell(301, true)], ip)).status).toBe(200);
  });

  it('holds the throttle in the shared cache, and a write on one replica changes the other replica\'s list', async () => {
    const replica = await startTestApp({ DATABASE_URL: app.databaseUrl, REDIS_KEY_PREFIX: app.platform.config.REDIS_KEY_PREFIX, TRUST_PROXY: '1' });
    try {
      // The replica knows the seeded demo service from the database.
      expect(replica.platform.demo.isDemoService(DEMO)).toBe(true);
      const listPath = `/api/flags${query({ serviceId: DEMO, environment: 'production', limit: 4096, fields: 'key,enabled' })}`;
      const cached = await replica.request('GET', listPath);
      const etag = cached.headers.get('etag')!;
      expect(cached.body.flags.find((f: { key: string }) => f.key === 'px-310')).toEqual({ key: 'px-310', enabled: false });

      const ip = freshIp();
      expect((await demoPatch([cell(310, true)], ip)).status).toBe(200);
      const second = await replica.request('PATCH', '/api/flags/bulk', { body: { flags: [cell(311, true)] }, headers: ip });
      expect(second.status).toBe(429);

      const changed = await eventually(async () => {
        const res = await replica.request('GET', listPath, { headers: { 'if-none-match': etag } });
        return res.status === 200 ? res : undefined;
      }, 30_000);
      expect(changed.body.flags.find((f: { key: string }) => f.key === 'px-310')).toEqual({ key: 'px-310', enabled: true });
      expect(changed.body.flags.find((f: { key: string }) => f.key === 'px-311')).toEqual({ key: 'px-311', enabled: false });
    } finally {
      await replica.stop({ keepDatabase: true });
    }
  });

  it('takes 4,096 updates in one request (one transaction) and refuses 4,097', async () => {
    const flags = Array.from({ length: 4096 }, (_, n) => cell(n, n % 3 === 0, 'development'));
    const started = Date.now();
    const res = await demoPatch(flags, freshIp(), '?summary=true');
    const elapsed = Date.now() - started;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, total: 4096, succeeded: 4096, failed: 0 });
    const [counts] = await app.platform.db.sql<{ on: number }[]>`
      SELECT count(*) FILTER (WHERE enabled)::int AS on FROM flags WHERE service_id = ${DEMO} AND environment = 'development'`;
    expect(counts.on).toBe(Math.ceil(4096 / 3));
    const [events] = await app.platform.db.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM flag_outbox WHERE service_id = ${DEMO} AND environment = 'development' AND payload->>'actor' = 'public-demo'`;
    // Only flags whose state changed are written: 1,366 turned on, and px-5 (turned on by a member above) turned off.
    expect(events.n).toBe(Math.ceil(4096 / 3) + 1);
    // A generous bound for a loaded machine; the speed itself is a benchmark figure.
    expect(elapsed).toBeLessThan(45_000);

    const tooMany = await demoPatch([...flags, cell(0, true, 'staging')], freshIp());
    expect(tooMany.status).toBe(400);
  });

  it('reports unknown flags and invalid items per item; an all-invalid request writes nothing and costs no throttle slot', async () => {
    const ip = freshIp();
    const invalid = await demoPatch([{ key: 'px-1', serviceId: DEMO, environment: 'production', updates: { name: 'no enabled' } }], ip);
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({ error: 'Bad Request', success: false, failed: 1, results: [{ status: 'failure', statusCode: 400 }] });
    const mixed = await demoPatch([cell(400, true), cell(99_999, true)], ip);
    expect(mixed.status).toBe(207);
    expect(mixed.body.results[1]).toMatchObject({ key: 'px-99999', status: 'failure', statusCode: 404 });
  });

  it('returns only success, total, succeeded and failed with ?summary=true', async () => {
    const res = await demoPatch([cell(500, true)], freshIp(), '?summary=true');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, total: 1, succeeded: 1, failed: 0 });
  });

  it('applies normal auth, CSRF and write permission to the whole request when any item is not on a demo service', async () => {
    const own = await app.request('POST', '/api/flags', {
      body: { key: 'mixed-flag', serviceId: fx.serviceId, environment: 'production' },
      cookie: fx.owner.cookie,
      csrf: fx.owner.csrf,
    });
    expect(own.status).toBe(201);
    const items = [cell(600, true), { key: 'mixed-flag', serviceId: fx.serviceId, environment: 'production', updates: { enabled: true } }];

    const anonymous = await demoPatch(items);
    expect(anonymous.status).toBe(401);
    const noCsrf = await app.request('PATCH', '/api/flags/bulk', { body: { flags: items }, cookie: fx.owner.cookie, headers: freshIp() });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body.message).toMatch(/CSRF/);
    const [untouched] = await app.platform.db.sql`SELECT enabled FROM flags WHERE service_id = ${DEMO} AND environment = 'production' AND key = 'px-600'`;
    expect(untouched.enabled).toBe(false);

    // With a session and CSRF the whole request is an ordinary bulk update: the demo project is not the caller's.
    const signedIn = await fx.owner.request('PATCH', '/api/flags/bulk', { flags: items });
    expect(signedIn.status).toBe(207);
    expect(signedIn.body.results[0]).toMatchObject({ status: 'failure', statusCode: 404, error: 'Service not found' });
    expect(signedIn.body.results[1]).toMatchObject({ status: 'success', flag: { key: 'mixed-flag', enabled: true } });

    // A viewer of the other service's project lacks write permission for its item.
    const viewer = await fx.users.viewer.request('PATCH', '/api/flags/bulk', { flags: [items[1]] });
    expect(viewer.status).toBe(403);
    expect(viewer.body.results[0].error).toBe("Forbidden: You need 'write' permission");
  });

  it('keeps the 100-item limit for requests that are not demo-only', async () => {
    const serviceId = await addService(fx.owner, fx.projectId, 'limits');
    const items = Array.from({ length: 101 }, (_, n) => (n === 0 ? { key: 'x', serviceId, environment: 'production', updates: { enabled: true } } : cell(n, true)));
    const res = await fx.owner.request('PATCH', '/api/flags/bulk', { flags: items });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/at most 100 items/);
  });
});

describe('seeding from two processes at once', () => {
  it('creates the grid exactly once', async () => {
    await app.platform.db.sql`DELETE FROM orgs WHERE id = ${DEMO_SEED_IDS.org}`;
    const [{ n: gone }] = await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM flags WHERE service_id = ${DEMO}`;
    expect(gone).toBe(0);
    const env = { DATABASE_URL: app.databaseUrl, DEMO_SEED: 'true' };
    const [a, b] = await Promise.all([startTestApp(env), startTestApp(env)]);
    try {
      const [{ n }] = await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM flags WHERE service_id = ${DEMO}`;
      expect(n).toBe(12_288);
      const [{ v }] = await app.platform.db.sql<{ v: number }[]>`SELECT count(*)::int AS v FROM flag_versions WHERE service_id = ${DEMO}`;
      expect(v).toBe(12_288);
      const seeds = await app.platform.db.sql`SELECT 1 FROM audit_logs WHERE action = 'demo.seed'`;
      expect(seeds).toHaveLength(2);
      expect(a.platform.demo.isDemoService(DEMO) && b.platform.demo.isDemoService(DEMO)).toBe(true);
    } finally {
      await Promise.all([a.stop({ keepDatabase: true }), b.stop({ keepDatabase: true })]);
    }
  });
});
