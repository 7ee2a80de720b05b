import { AccountStore } from '../../api/features/accounts/store';
import { SESSION_COOKIE, SessionManager } from '../../api/auth/sessions';
import { newId } from '../../api/infra/ids';
import { freePort } from '../../api/infra/temporal';
import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';

const OPS = 'ops@example.com';

/** Production runs each role as its own process; these are separate platforms sharing backends. */
describe('process roles', () => {
  let control: TestApp;
  let worker: TestApp | undefined;
  beforeAll(async () => {
    control = await startTestApp({ ROLES: 'control' });
  });
  afterAll(async () => {
    await worker?.stop({ keepDatabase: true });
    await control?.stop();
  });

  it('a control-only instance listens on one port and runs no worker', () => {
    // The management listener opens on every role (docs/operations.md#management-listener).
    expect(Object.keys(control.running.urls)).toEqual(['management', 'control']);
    expect(control.running.worker).toBeUndefined();
  });

  it('work queued by the control plane is done by a separate worker process', async () => {
    const user = await control.signup();
    const mailbox = () => control.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(user.email)}`);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await mailbox()).body.messages).toEqual([]);

    worker = await startTestApp({
      ROLES: 'worker',
      DATABASE_URL: control.databaseUrl,
      REDIS_KEY_PREFIX: control.platform.config.REDIS_KEY_PREFIX,
      TEMPORAL_TASK_QUEUE: control.platform.config.TEMPORAL_TASK_QUEUE,
    });
    expect(Object.keys(worker.running.urls)).toEqual(['management']);
    const messages = await eventually(async () => {
      const m = (await mailbox()).body.messages;
      return m.length ? m : undefined;
    });
    expect(messages[0].subject).toMatch(/verify/i);
  });
});

describe('data plane and ingest listeners', () => {
  let app: TestApp;
  let ops: TestUser;
  beforeAll(async () => {
    app = await startTestApp({ ADMIN_EMAILS: OPS });
    ops = await app.signup({ email: OPS, verified: true });
  });
  afterAll(() => app?.stop());

  it('serve health but not the management API', async () => {
    for (const listener of ['data', 'ingest'] as const) {
      expect((await app.request('GET', '/api/health', { listener })).status).toBe(200);
      const signup = await app.request('POST', '/api/auth/signup', {
        listener,
        body: { email: `x-${listener}@example.com`, password: 'long enough pw', name: 'X' },
      });
      expect(signup.status).toBe(404);
    }
  });

  it('health reports real cache and storage checks with the documented fields', async () => {
    const res = await app.request('GET', '/api/health');
    expect(res.body).toMatchObject({
      status: 'ok',
      timestamp: expect.any(String),
      version: { app: expect.any(String), commit: expect.any(String), environment: 'test' },
      cache: {
        backend: 'redis',
        readCache: { working: true, testTime: expect.any(Number) },
        writeCache: { working: true, testTime: expect.any(Number) },
      },
      storage: { backend: 'postgres', working: true },
    });
  });

  it('admin health checks storage, cache, analytics (write + read back), Temporal and auth', async () => {
    const res = await ops.request('GET', '/api/health/admin');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: 'ok',
      analytics: { backend: 'chdb', working: true },
      workflows: { working: true },
      auth: { sessions: { working: true } },
    });
    const rows = await app.platform.analytics.client.query({ query: 'SELECT count() AS n FROM health_probe', format: 'JSONEachRow' });
    expect(Number(((await rows.json()) as { n: string }[])[0].n)).toBeGreaterThan(0);
  });

  it('evaluation health checks the evaluation pipeline', async () => {
    const res = await ops.request('GET', '/api/health/evaluation');
    expect(res.status).toBe(200);
    expect(res.body.checks.analytics.working).toBe(true);
  });

  it('reports degraded with 503 when a backend fails', async () => {
    const original = app.platform.cache.get.bind(app.platform.cache);
    app.platform.cache.get = async () => {
      throw new Error('cache down');
    };
    try {
      const res = await app.request('GET', '/api/health');
      expect(res.status).toBe(503);
      expect(res.body.status).toBe('degraded');
      // What failed is public; why (backend error text) only for administrators.
      expect(res.body.cache.readCache).toEqual({ working: false, testTime: expect.any(Number) });
      const admin = await ops.request('GET', '/api/health/admin');
      expect(admin.status).toBe(503);
      expect(admin.body.cache.readCache).toMatchObject({ working: false, error: 'cache down' });
    } finally {
      app.platform.cache.get = original;
    }
  });
});

describe('a lone data-plane process', () => {
  let data: TestApp;
  beforeAll(async () => {
    data = await startTestApp({ ROLES: 'data', ADMIN_EMAILS: OPS });
  });

  /** An administrator's session, made with the real account code: a lone data plane has no signup route. */
  async function opsCookie(): Promise<string> {
    const { sql } = data.platform.db;
    const store = new AccountStore();
    const user = await sql.begin((tx) => store.createUser(tx, { id: newId('usr'), orgId: newId('org'), email: OPS, name: 'Ops', passwordHash: 'unused' }));
    await data.platform.db.sql`UPDATE users SET email_verified = true WHERE id = ${user.id}`;
    const { cookieValue } = await new SessionManager(sql, store, 1).create(user.id, '127.0.0.1', 'test');
    return `${SESSION_COOKIE}=${cookieValue}`;
  }
  afterAll(() => data?.stop());

  it('serves the data plane without connecting to Temporal', async () => {
    // flagd's ports open with the data plane (docs/local-evaluation.md#ports).
    expect(Object.keys(data.running.urls)).toEqual(['management', 'data', 'flagd', 'flagdSync']);
    expect(data.platform.temporal.connected).toBe(false);
    expect(() => data.platform.temporal.client).toThrow(/not opened/);
    const admin = await data.request('GET', '/api/health/admin', { listener: 'data', cookie: await opsCookie() });
    expect(admin.status).toBe(200);
    expect(admin.body.workflows).toMatchObject({ working: true, used: false });
    const evaluation = await data.request('POST', '/api/flags/evaluate', {
      listener: 'data',
      body: { flagKey: 'nope', serviceId: 'svc_missing', environment: 'development', defaultValue: false, context: {} },
    });
    expect(evaluation.status).toBeLessThan(500);
  });
});

describe('analytics schema ownership', () => {
  /** A ClickHouse URL nothing answers: a process that runs analytics DDL at start cannot start against it. */
  let nobody: string;
  let data: TestApp | undefined;
  beforeAll(async () => {
    nobody = `http://127.0.0.1:${await freePort()}`;
  });
  afterAll(() => data?.stop());

  it('a data-only process runs no analytics DDL: it starts and serves without reaching ClickHouse', async () => {
    data = await startTestApp({ ROLES: 'data', CLICKHOUSE_URL: nobody });
    expect(data.platform.analytics.backend).toBe('clickhouse');
    const evaluation = await data.request('POST', '/api/flags/evaluate', {
      listener: 'data',
      body: { flagKey: 'nope', serviceId: 'svc_missing', environment: 'development', defaultValue: false, context: {} },
    });
    expect(evaluation.status).toBeLessThan(500);
  });

  it('the control plane owns the schema: it creates it at start', async () => {
    // Same Postgres database as the data plane, so the failed start leaves nothing behind.
    await expect(startTestApp({ ROLES: 'control', CLICKHOUSE_URL: nobody, DATABASE_URL: data!.databaseUrl })).rejects.toThrow(/ECONNREFUSED|connect/i);
  });
});
