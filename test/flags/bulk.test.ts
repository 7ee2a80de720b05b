import { testCredentials } from '../projects/support';
import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { addService, createProjectFixture, projectToken, query, type ProjectFixture } from './fixtures';

/** A configured demo service id that names no service: demo-only requests reach it, nothing exists there. */
const CONFIGURED_DEMO = 'svc_configured_demo';

let app: TestApp;
let fx: ProjectFixture;
let other: ProjectFixture;
let owner: TestUser;
let creds: ReturnType<typeof testCredentials>;

beforeAll(async () => {
  app = await startTestApp({ DEMO_SERVICE_IDS: CONFIGURED_DEMO });
  fx = await createProjectFixture(app, 'Bulk project');
  other = await createProjectFixture(app, 'Someone else');
  owner = fx.owner;
  creds = testCredentials(app);
});
afterAll(() => app?.stop());

let counter = 0;
const uniqueKey = (prefix = 'bulk') => `${prefix}-${++counter}-${Date.now().toString(36)}`;

async function flagRow(serviceId: string, key: string, environment = 'development') {
  const [row] = await app.platform.db.sql<{ id: string; enabled: boolean; name: string; version: number }[]>`
    SELECT id, enabled, name, version FROM flags WHERE service_id = ${serviceId} AND environment = ${environment} AND key = ${key}`;
  return row;
}

async function createFlags(keys: string[], serviceId = fx.serviceId, user = owner) {
  const res = await user.request('POST', '/api/flags/bulk', { flags: keys.map((key) => ({ key, serviceId, environment: 'development' })) });
  if (res.status !== 201) throw new Error(`bulk create failed: ${res.status} ${res.text}`);
}

describe('POST /api/flags/bulk', () => {
  it('creates every item (201) with per-item results, snapshots and audit entries', async () => {
    const [a, b] = [uniqueKey(), uniqueKey()];
    const res = await owner.request('POST', '/api/flags/bulk', {
      flags: [
        { key: a, serviceId: fx.serviceId, environment: 'staging', name: 'A', type: 'string', defaultValue: 'x', tags: ['bulk'] },
        { key: b, serviceId: fx.serviceId, name: 'B', enabled: true },
      ],
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ success: true, total: 2, succeeded: 2, failed: 0 });
    expect(res.body.results[0]).toMatchObject({ index: 0, key: a, status: 'success', flag: { key: a, environment: 'staging', type: 'string', defaultValue: 'x', version: 1 } });
    // Without environment: every environment (docs/api-reference.md#flags), the development copy
    // reported.
    expect(res.body.results[1]).toMatchObject({ index: 1, key: b, status: 'success', flag: { key: b, environment: 'development', enabled: true } });
    expect(await flagRow(fx.serviceId, b, 'production')).toMatchObject({ enabled: false });
    expect(await flagRow(fx.serviceId, a, 'development')).toBeUndefined();

    const audit = await app.platform.db.sql`SELECT action, metadata FROM audit_logs WHERE resource_name = ${a}`;
    expect(audit).toEqual([{ action: 'flag.create', metadata: expect.objectContaining({ via: 'bulk', environment: 'staging' }) }]);
    const versions = await app.platform.db.sql`SELECT version, change_type FROM flag_versions WHERE flag_key = ${b}`;
    expect(versions).toHaveLength(3);
  });

  it('answers 207 for mixed results; each item stands alone (a failure undoes nothing)', async () => {
    const existing = uniqueKey();
    await createFlags([existing]);
    const fresh = uniqueKey();
    const res = await owner.request('POST', '/api/flags/bulk', {
      flags: [
        { key: existing, serviceId: fx.serviceId, environment: 'development' },
        { key: fresh, serviceId: fx.serviceId, environment: 'development' },
        { key: 'Not a key!', serviceId: fx.serviceId },
        { key: uniqueKey(), serviceId: fx.serviceId, type: 'number', defaultValue: 'nope' },
        'not an object',
      ],
    });
    expect(res.status).toBe(207);
    expect(res.body).toMatchObject({ success: false, total: 5, succeeded: 1, failed: 4 });
    expect(res.body.results[0]).toMatchObject({ key: existing, status: 'failure', statusCode: 409, error: expect.stringContaining('already exists') });
    expect(res.body.results[1]).toMatchObject({ key: fresh, status: 'success' });
    expect(res.body.results[2]).toMatchObject({ status: 'failure', statusCode: 400, details: [expect.objectContaining({ path: 'key' })] });
    expect(res.body.results[3]).toMatchObject({ status: 'failure', statusCode: 400, details: [expect.objectContaining({ path: 'defaultValue' })] });
    expect(res.body.results[4]).toMatchObject({ index: 4, key: null, status: 'failure', statusCode: 400 });
    expect(await flagRow(fx.serviceId, fresh)).toBeDefined();
  });

  it('answers the shared status with the bulk body plus error and message when every item failed', async () => {
    const existing = uniqueKey();
    await createFlags([existing]);
    const res = await owner.request('POST', '/api/flags/bulk', { flags: [{ key: existing, serviceId: fx.serviceId, environment: 'development' }] });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: 'Conflict', message: 'All 1 items failed', success: false, total: 1, succeeded: 0, failed: 1 });
    const mixedReasons = await owner.request('POST', '/api/flags/bulk', {
      flags: [{ key: existing, serviceId: fx.serviceId, environment: 'development' }, { key: '-bad' , serviceId: fx.serviceId }],
    });
    expect(mixedReasons.status).toBe(400);
    expect(mixedReasons.body).toMatchObject({ error: 'Bad Request', failed: 2 });
  });

  it('returns only the counts with ?summary=true', async () => {
    const res = await owner.request('POST', '/api/flags/bulk?summary=true', { flags: [{ key: uniqueKey(), serviceId: fx.serviceId }] });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ success: true, total: 1, succeeded: 1, failed: 0 });
  });

  it('keeps the error envelope on an all-failed ?summary=true request', async () => {
    const res = await owner.request('DELETE', '/api/flags/bulk?summary=true', {
      flags: [{ key: uniqueKey('missing'), serviceId: fx.serviceId, environment: 'development' }],
    });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ success: false, total: 1, succeeded: 0, failed: 1, error: 'Not Found', message: 'All 1 items failed' });
  });

  it('refuses more than 100 items, an empty list and unknown body fields with 400 and creates nothing', async () => {
    const prefix = uniqueKey('limit');
    const items = Array.from({ length: 101 }, (_, i) => ({ key: `${prefix}-${i}`, serviceId: fx.serviceId, environment: 'development' }));
    const tooMany = await owner.request('POST', '/api/flags/bulk', { flags: items });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.message).toMatch(/at most 100 items/);
    const [{ n }] = await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM flags WHERE key LIKE ${`${prefix}-%`}`;
    expect(n).toBe(0);
    const exactly100 = await owner.request('POST', '/api/flags/bulk?summary=true', { flags: items.slice(0, 100) });
    expect(exactly100.status).toBe(201);
    expect(exactly100.body).toEqual({ success: true, total: 100, succeeded: 100, failed: 0 });

    expect((await owner.request('POST', '/api/flags/bulk', { flags: [] })).status).toBe(400);
    expect((await owner.request('POST', '/api/flags/bulk', { flags: [], extra: 1 })).status).toBe(400);
    expect((await owner.request('POST', '/api/flags/bulk', [{ key: 'x' }])).status).toBe(400);
    expect((await owner.request('POST', '/api/flags/bulk', {})).status).toBe(400);
    expect((await owner.request('POST', '/api/flags/bulk?summary=maybe', { flags: [{ key: uniqueKey(), serviceId: fx.serviceId }] })).status).toBe(400);
  });

  it('raises the limit to 4,096 only when every item is on a demo service', async () => {
    const items = Array.from({ length: 101 }, (_, i) => ({ key: `px-${i}`, serviceId: CONFIGURED_DEMO, environment: 'development' }));
    const res = await owner.request('POST', '/api/flags/bulk?summary=true', { flags: items });
    // Past the limit check; every item then fails alone (the configured demo service does not exist here).
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ success: false, total: 101, succeeded: 0, failed: 101, error: 'Not Found', message: 'All 101 items failed' });
  });

  it('needs a credential, CSRF for sessions, and write permission per item', async () => {
    const item = { key: uniqueKey(), serviceId: fx.serviceId };
    expect((await app.request('POST', '/api/flags/bulk', { body: { flags: [item] } })).status).toBe(401);
    const noCsrf = await app.request('POST', '/api/flags/bulk', { body: { flags: [item] }, cookie: owner.cookie });
    expect(noCsrf.status).toBe(403);

    const viewer = await fx.users.viewer.request('POST', '/api/flags/bulk', { flags: [item] });
    expect(viewer.status).toBe(403);
    expect(viewer.body.results[0]).toMatchObject({ status: 'failure', statusCode: 403, error: "Forbidden: You need 'write' permission" });
    expect(await flagRow(fx.serviceId, item.key)).toBeUndefined();

    const member = await fx.users.member.request('POST', '/api/flags/bulk', { flags: [item] });
    expect(member.status).toBe(201);

    const readToken = await projectToken(owner, fx.projectId, { read: true });
    const byReadToken = await app.request('POST', '/api/flags/bulk', { body: { flags: [{ key: uniqueKey(), serviceId: fx.serviceId }] }, token: readToken });
    expect(byReadToken.status).toBe(403);
    const writeToken = await projectToken(owner, fx.projectId, { read: true, write: true });
    const byWriteToken = await app.request('POST', '/api/flags/bulk', { body: { flags: [{ key: uniqueKey(), serviceId: fx.serviceId }] }, token: writeToken });
    expect(byWriteToken.status).toBe(201);

    const readTier = await creds.personal(owner, 'read');
    const byReadTier = await app.request('POST', '/api/flags/bulk', { body: { flags: [{ key: uniqueKey(), serviceId: fx.serviceId }] }, token: readTier });
    expect(byReadTier.status).toBe(403);
    expect(byReadTier.body.message).toMatch(/read-only/);
  });

  it("never touches another project's service: such items fail as 'Service not found', like a missing service (BOLA)", async () => {
    const mine = uniqueKey();
    const theirs = uniqueKey();
    const res = await owner.request('POST', '/api/flags/bulk', {
      flags: [
        { key: mine, serviceId: fx.serviceId },
        { key: theirs, serviceId: other.serviceId },
        { key: uniqueKey(), serviceId: 'svc_does_not_exist' },
      ],
    });
    expect(res.status).toBe(207);
    expect(res.body.results[1]).toEqual({ index: 1, key: theirs, status: 'failure', error: 'Service not found', statusCode: 404 });
    expect(res.body.results[2]).toEqual({ index: 2, key: expect.any(String), status: 'failure', error: 'Service not found', statusCode: 404 });
    expect(await flagRow(other.serviceId, theirs)).toBeUndefined();

    // A project token reaches only its own project.
    const token = await projectToken(owner, fx.projectId, { read: true, write: true, delete: true });
    const byToken = await app.request('POST', '/api/flags/bulk', { body: { flags: [{ key: uniqueKey(), serviceId: other.serviceId }] }, token });
    expect(byToken.status).toBe(404);
    expect(byToken.body.results[0].error).toBe('Service not found');
  });
});

describe('PATCH /api/flags/bulk', () => {
  it('updates only the given fields of every item (200) and audits them', async () => {
    const [a, b] = [uniqueKey(), uniqueKey()];
    await createFlags([a, b]);
    const res = await owner.request('PATCH', '/api/flags/bulk', {
      flags: [
        { key: a, serviceId: fx.serviceId, environment: 'development', updates: { enabled: true, description: 'bulk on' } },
        { key: b, serviceId: fx.serviceId, updates: { name: 'Renamed B', tags: ['x'] } },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, total: 2, succeeded: 2, failed: 0 });
    expect(res.body.results[0].flag).toMatchObject({ key: a, enabled: true, description: 'bulk on', name: a, version: 2 });
    expect(res.body.results[1].flag).toMatchObject({ key: b, name: 'Renamed B', tags: ['x'], enabled: false, version: 2 });
    const audit = await app.platform.db.sql`SELECT action, changes, metadata FROM audit_logs WHERE resource_name = ${a} AND action = 'flag.update'`;
    expect(audit).toHaveLength(1);
    expect(audit[0].metadata).toMatchObject({ via: 'bulk', version: 2 });
    expect(audit[0].changes).toEqual(
      expect.arrayContaining([{ field: 'enabled', oldValue: false, newValue: true }, { field: 'description', oldValue: '', newValue: 'bulk on' }]),
    );
  });

  it('fails single items for stale versions, unknown flags, identity fields and invalid values (207), with ?summary=true counts', async () => {
    const key = uniqueKey();
    await createFlags([key]);
    const items = [
      { key, serviceId: fx.serviceId, updates: { enabled: true, version: 1 } },
      { key, serviceId: fx.serviceId, updates: { enabled: false, version: 1 } },
      { key: 'missing-flag', serviceId: fx.serviceId, updates: { enabled: true } },
      { key, serviceId: fx.serviceId, updates: { serviceId: other.serviceId } },
      { key, serviceId: fx.serviceId, updates: { defaultValue: 'not boolean' } },
      { key, serviceId: fx.serviceId, updates: {} },
    ];
    const res = await owner.request('PATCH', '/api/flags/bulk', { flags: items });
    expect(res.status).toBe(207);
    expect(res.body.results.map((r: { status: string; statusCode?: number }) => r.statusCode ?? r.status)).toEqual(['success', 409, 404, 400, 400, 400]);
    expect(await flagRow(fx.serviceId, key)).toMatchObject({ enabled: true, version: 2 });

    const summary = await owner.request('PATCH', '/api/flags/bulk?summary=true', { flags: items.slice(2, 4) });
    expect(summary.status).toBe(400);
    expect(summary.body).toEqual({ success: false, total: 2, succeeded: 0, failed: 2, error: 'Bad Request', message: 'All 2 items failed' });
  });

  it('needs authentication and CSRF, and write permission per item (no demo service involved)', async () => {
    const key = uniqueKey();
    await createFlags([key]);
    const items = [{ key, serviceId: fx.serviceId, updates: { enabled: true } }];
    expect((await app.request('PATCH', '/api/flags/bulk', { body: { flags: items } })).status).toBe(401);
    const noCsrf = await app.request('PATCH', '/api/flags/bulk', { body: { flags: items }, cookie: owner.cookie });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body.message).toMatch(/CSRF/);
    const viewer = await fx.users.viewer.request('PATCH', '/api/flags/bulk', { flags: items });
    expect(viewer.status).toBe(403);
    const stranger = await other.owner.request('PATCH', '/api/flags/bulk', { flags: items });
    expect(stranger.status).toBe(404);
    expect(stranger.body.results[0]).toEqual({ index: 0, key, status: 'failure', error: 'Service not found', statusCode: 404 });
    expect(await flagRow(fx.serviceId, key)).toMatchObject({ enabled: false, version: 1 });
    const readTier = await creds.personal(owner, 'read');
    expect((await app.request('PATCH', '/api/flags/bulk', { body: { flags: items }, token: readTier })).status).toBe(403);
    const writeTier = await creds.personal(owner, 'write');
    expect((await app.request('PATCH', '/api/flags/bulk', { body: { flags: items }, token: writeTier })).status).toBe(200);
  });

  it('treats a request whose every item is on a demo service as a demo write (no credential; enabled only)', async () => {
    const res = await app.request('PATCH', '/api/flags/bulk', {
      body: { flags: [{ key: 'px-1', serviceId: CONFIGURED_DEMO, environment: 'production', updates: { enabled: true } }] },
    });
    // Open without a credential; the flag does not exist in this deployment.
    expect(res.status).toBe(404);
    expect(res.body.results[0]).toMatchObject({ key: 'px-1', status: 'failure', statusCode: 404 });
  });
});

describe('DELETE /api/flags/bulk', () => {
  it('deletes every item (200), one audit entry each', async () => {
    const [a, b] = [uniqueKey(), uniqueKey()];
    await createFlags([a, b]);
    const res = await owner.request('DELETE', '/api/flags/bulk', {
      flags: [
        { key: a, serviceId: fx.serviceId, environment: 'development' },
        { key: b, serviceId: fx.serviceId, version: 1 },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      total: 2,
      succeeded: 2,
      failed: 0,
      results: [
        { index: 0, key: a, status: 'success' },
        { index: 1, key: b, status: 'success' },
      ],
    });
    expect(await flagRow(fx.serviceId, a)).toBeUndefined();
    expect(await flagRow(fx.serviceId, b)).toBeUndefined();
    const audit = await app.platform.db.sql`SELECT action, metadata FROM audit_logs WHERE resource_name = ${a} AND action = 'flag.delete'`;
    expect(audit).toEqual([{ action: 'flag.delete', metadata: expect.objectContaining({ via: 'bulk' }) }]);
  });

  it('reports missing flags and stale versions per item (207) and returns counts only with ?summary=true', async () => {
    const [a, b] = [uniqueKey(), uniqueKey()];
    await createFlags([a, b]);
    const res = await owner.request('DELETE', '/api/flags/bulk?summary=true', {
      flags: [
        { key: a, serviceId: fx.serviceId },
        { key: a, serviceId: fx.serviceId },
        { key: b, serviceId: fx.serviceId, version: 7 },
      ],
    });
    expect(res.status).toBe(207);
    expect(res.body).toEqual({ success: false, total: 3, succeeded: 1, failed: 2 });
    expect(await flagRow(fx.serviceId, b)).toBeDefined();
  });

  it('needs delete permission per item: members may write but not delete; other projects are unreachable', async () => {
    const key = uniqueKey();
    await createFlags([key]);
    const items = [{ key, serviceId: fx.serviceId }];
    expect((await app.request('DELETE', '/api/flags/bulk', { body: { flags: items } })).status).toBe(401);
    expect((await app.request('DELETE', '/api/flags/bulk', { body: { flags: items }, cookie: owner.cookie })).status).toBe(403);
    const member = await fx.users.member.request('DELETE', '/api/flags/bulk', { flags: items });
    expect(member.status).toBe(403);
    expect(member.body.results[0].error).toBe("Forbidden: You need 'delete' permission");
    const writeToken = await projectToken(owner, fx.projectId, { read: true, write: true });
    expect((await app.request('DELETE', '/api/flags/bulk', { body: { flags: items }, token: writeToken })).status).toBe(403);
    const stranger = await other.owner.request('DELETE', '/api/flags/bulk', { flags: items });
    expect(stranger.status).toBe(404);
    expect(await flagRow(fx.serviceId, key)).toBeDefined();
    const admin = await fx.users.admin.request('DELETE', '/api/flags/bulk', { flags: items });
    expect(admin.status).toBe(200);
    expect(await flagRow(fx.serviceId, key)).toBeUndefined();
  });

  it('refuses more than 100 items', async () => {
    const serviceId = await addService(owner, fx.projectId, `svc-${uniqueKey()}`);
    const items = Array.from({ length: 101 }, (_, i) => ({ key: `k-${i}`, serviceId }));
    const res = await owner.request('DELETE', '/api/flags/bulk', { flags: items });
    expect(res.status).toBe(400);
  });
});

describe('configured demo services', () => {
  it('are demo services for every rule, but GET /api/demo lists only those that exist', async () => {
    expect(app.platform.demo.isDemoService(CONFIGURED_DEMO)).toBe(true);
    expect(app.platform.demo.demoServiceIds()).toEqual([CONFIGURED_DEMO]);
    const res = await app.request('GET', '/api/demo');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ services: [] });
  });
});

describe('routing', () => {
  it('keeps /api/flags/bulk apart from /api/flags/:key', async () => {
    const res = await owner.request('GET', `/api/flags/bulk${query({ serviceId: fx.serviceId })}`);
    // No flag can be named "bulk" (reserved key), so the per-flag route answers 404.
    expect(res.status).toBe(404);
    const created = await owner.request('POST', '/api/flags', { key: 'bulk', serviceId: fx.serviceId });
    expect(created.status).toBe(400);
  });
});
