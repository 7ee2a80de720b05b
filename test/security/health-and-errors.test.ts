import { randomBytes } from 'node:crypto';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import postgres from 'postgres';
import { EvaluationService } from '../../api/gen/flags/v1/evaluation_pb';
import { requireInfra, startTestApp, type TestApp } from '../support/harness';
import { createOpaque, createPersonalToken, createProject } from '../tokens/support';

/**
 * The detailed health endpoints are for instance administrators
 * (ADMIN_EMAILS, verified), and no backend error text reaches an anonymous caller: not through
 * the public health check, REST, Connect or gRPC-Web.
 */
describe('detailed health needs an instance administrator', () => {
  let app: TestApp;
  const adminEmail = `ops-${randomBytes(3).toString('hex')}@example.com`;
  beforeAll(async () => {
    app = await startTestApp({ ADMIN_EMAILS: `someone-else@example.com, ${adminEmail.toUpperCase()}` });
  });
  afterAll(() => app?.stop());

  const PATHS = ['/api/health/admin', '/api/health/evaluation'];

  it('answers 401 anonymous, 403 to other users and project tokens, 200 to an administrator', async () => {
    const user = await app.signup({ verified: true });
    const token = (await createOpaque(user, await createProject(user), { read: true })).value;
    const admin = await app.signup({ email: adminEmail, verified: true });
    const adminPat = (await createPersonalToken(admin, { tier: 'read' })).value;
    for (const path of PATHS) {
      for (const listener of ['control', 'data'] as const) {
        expect({ path, listener, status: (await app.request('GET', path, { listener })).status }).toEqual({ path, listener, status: 401 });
      }
      const byUser = await user.request('GET', path);
      expect({ path, status: byUser.status, body: byUser.body }).toEqual({
        path,
        status: 403,
        body: { error: 'Forbidden', message: 'Forbidden: only instance administrators (ADMIN_EMAILS) may see this' },
      });
      expect((await app.request('GET', path, { token })).status).toBe(403);
      expect((await admin.request('GET', path)).status).toBe(200);
      expect((await app.request('GET', path, { token: adminPat, listener: 'data' })).status).toBe(200);
    }
    expect((await app.request('GET', '/api/health')).status).toBe(200);
  });

  it('an unverified account with an administrator address is not an administrator', async () => {
    const other = await startTestApp({ ADMIN_EMAILS: 'claimed@example.com' });
    try {
      const squatter = await other.signup({ email: 'claimed@example.com' });
      expect((await squatter.request('GET', '/api/health/admin')).status).toBe(403);
    } finally {
      await other.stop();
    }
  });
});

describe('no backend error text reaches anonymous callers', () => {
  let app: TestApp;
  let dbName: string;
  const admin = () => postgres(requireInfra().databaseUrl, { max: 1, onnotice: () => undefined });

  beforeAll(async () => {
    app = await startTestApp();
    dbName = new URL(app.databaseUrl).pathname.slice(1);
    // Postgres goes away for this platform only: no new connections, the open ones ended.
    const sql = admin();
    await sql.unsafe(`ALTER DATABASE ${dbName} ALLOW_CONNECTIONS false`);
    await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${dbName}`;
    await sql.end();
  });
  afterAll(async () => {
    const sql = admin();
    await sql.unsafe(`ALTER DATABASE ${dbName} ALLOW_CONNECTIONS true`);
    await sql.end();
    await app?.stop();
  });

  /** Words of Postgres's own messages for this failure, and the database's name. */
  const leaks = (text: string) => [dbName, 'accepting connections', 'terminat', 'ECONNRE', 'database'].filter((w) => text.toLowerCase().includes(w.toLowerCase()));

  it('public health reports what failed, not why', async () => {
    const res = await app.request('GET', '/api/health');
    expect(res.status).toBe(503);
    expect(res.body.storage).toMatchObject({ backend: 'postgres', working: false });
    expect(res.body.storage.error).toBeUndefined();
    expect(leaks(res.text)).toEqual([]);
  });

  it('REST answers the generic envelope', async () => {
    for (const [method, path, body] of [
      ['POST', '/api/auth/login', { email: 'nobody@example.com', password: 'whatever it is' }],
      ['POST', '/api/flags/evaluate', { flagKey: 'f', serviceId: `svc_${randomBytes(6).toString('hex')}`, context: {} }],
    ] as const) {
      const res = await app.request(method, path, { body });
      // A refused connection is a 500; a pooled one the outage ended under the request is the
      // outage's 503 (one CI run): both in the generic envelope, no backend text.
      if (res.status === 503) expect(res.body).toMatchObject({ message: 'A backend this request needs is unavailable; retry shortly' });
      else {
        expect({ path, status: res.status }).toEqual({ path, status: 500 });
        expect(res.body).toEqual({ error: 'Internal Server Error', message: 'Internal server error' });
      }
      expect(leaks(res.text)).toEqual([]);
    }
  });

  it.each(['connect', 'grpc-web'] as const)('%s answers INTERNAL with the generic message', async (protocol) => {
    const transport =
      protocol === 'connect'
        ? createConnectTransport({ baseUrl: `${app.urls.data}/api/connect`, httpVersion: '1.1' })
        : createGrpcWebTransport({ baseUrl: `${app.urls.data}/api/grpc-web`, httpVersion: '1.1' });
    const client = createClient(EvaluationService, transport);
    const error = await client.resolveAll({ serviceId: `svc_${randomBytes(6).toString('hex')}`, environment: 'production' }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(error).toBeDefined();
    expect({ code: Code[error!.code], message: error!.rawMessage }).toEqual({ code: 'Internal', message: 'Internal server error' });
    expect(leaks(JSON.stringify(error!.metadata) + error!.rawMessage)).toEqual([]);
  });
});
