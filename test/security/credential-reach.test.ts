import { randomBytes } from 'node:crypto';
import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { createJwt, createOpaque, createPersonalToken, createProject } from '../tokens/support';

/**
 * What a credential can reach beyond its own project's flags. A
 * read-scoped project token ships in browser bundles, so it must not browse other users'
 * evaluation contexts or logs, nor learn its creator's e-mail; and no credential can grant a
 * role that holds more than the credential itself.
 */
let app: TestApp;
let owner: TestUser;
let projectId: string;
let serviceId: string;

beforeAll(async () => {
  app = await startTestApp();
  owner = await app.signup({ verified: true });
  projectId = await createProject(owner, 'Reach');
  const service = await owner.request('POST', '/api/services', { projectId, name: 'reach service' });
  expect(service.status).toBe(201);
  serviceId = service.body.id;
});
afterAll(() => app?.stop());

describe('project tokens on dashboard routes (point 6)', () => {
  it('a read token gets 403 on /api/contexts and /api/evaluations while a session reads them', async () => {
    const read = (await createOpaque(owner, projectId, { read: true, delete: true })).value;
    const jwt = (await createJwt(owner, projectId, ['read', 'delete'])).accessToken;
    const evaluated = await app.request('POST', '/api/flags/evaluate', {
      token: read,
      body: { flagKey: 'anything', serviceId, environment: 'development', defaultValue: false, context: { targetingKey: 'alice', email: 'alice@example.com' } },
    });
    expect(evaluated.status).toBe(200);

    for (const token of [read, jwt]) {
      for (const [method, path] of [
        ['GET', `/api/contexts?serviceId=${serviceId}`],
        ['GET', `/api/contexts?serviceId=${serviceId}&key=alice`],
        ['GET', `/api/evaluations?serviceId=${serviceId}`],
        ['GET', '/api/evaluations'],
        ['DELETE', '/api/evaluations?flagKey=anything'],
      ]) {
        const res = await app.request(method, path, { token });
        expect({ method, path, status: res.status, body: res.body }).toEqual({
          method,
          path,
          status: 403,
          body: { error: 'Forbidden', message: expect.stringMatching(/^Forbidden: project API tokens cannot/) },
        });
      }
    }

    const contexts = await owner.request('GET', `/api/contexts?serviceId=${serviceId}`);
    expect(contexts.status).toBe(200);
    expect(contexts.body.contexts.map((c: { targetingKey: string }) => c.targetingKey)).toContain('alice');
    expect((await owner.request('GET', `/api/evaluations?serviceId=${serviceId}`)).status).toBe(200);
    const pat = await createPersonalToken(owner, { tier: 'read' });
    expect((await app.request('GET', `/api/contexts?serviceId=${serviceId}`, { token: pat.value })).status).toBe(200);
    expect((await app.request('GET', `/api/evaluations?serviceId=${serviceId}`, { token: pat.value })).status).toBe(200);
  });

  it('/api/users/me with a project token describes the token, not its creator', async () => {
    const opaque = await createOpaque(owner, projectId, { read: true });
    const jwt = await createJwt(owner, projectId, ['read', 'manage_members']);
    for (const [token, id, tokenType, scopes] of [
      [opaque.value, opaque.token.id, 'opaque', ['read']],
      [jwt.accessToken, jwt.token.id, 'jwt', ['read', 'manage_members']],
    ] as const) {
      const res = await app.request('GET', '/api/users/me', { token });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ credential: { type: 'project_api_token', id, tokenType, scopes, projectId } });
      expect(res.text).not.toContain(owner.email);
      expect(res.text).not.toContain(owner.id);
    }
    const session = await owner.request('GET', '/api/users/me');
    expect(session.body).toMatchObject({ id: owner.id, email: owner.email, credential: { type: 'session' } });
  });
});

describe('a credential grants only what it holds (point 7)', () => {
  let candidates: TestUser[];
  let next = 0;
  beforeAll(async () => {
    candidates = [];
    for (let i = 0; i < 12; i++) candidates.push(await app.signup());
  });
  const fresh = () => candidates[next++];
  const invite = (token: string, role: string) =>
    app.request('POST', `/api/projects/${projectId}/invitations`, { token, body: { email: `invitee-${randomBytes(4).toString('hex')}@example.com`, role } });
  const add = (token: string, userId: string, role: string) => app.request('POST', `/api/projects/${projectId}/members`, { token, body: { userId, role } });
  const promote = (token: string, userId: string, role: string) => app.request('PATCH', `/api/projects/${projectId}/members/${userId}`, { token, body: { role } });
  const roleOf = async (userId: string) =>
    (await app.platform.db.sql<{ role: string }[]>`SELECT role FROM project_members WHERE project_id = ${projectId} AND user_id = ${userId}`)[0]?.role ?? null;
  const refusedToGrant = (role: string, scope: string) => ({
    status: 403,
    body: { error: 'Forbidden', message: `Forbidden: You need '${scope}' permission to grant the ${role} role` },
  });
  const outcome = (res: { status: number; body: any }) => (res.status >= 300 ? { status: res.status, body: res.body } : { status: res.status });

  it('a manage_members token alone cannot grant even viewer (it cannot read flags)', async () => {
    const token = (await createJwt(owner, projectId, ['manage_members'])).accessToken;
    const user = fresh();
    expect(outcome(await add(token, user.id, 'viewer'))).toEqual(refusedToGrant('viewer', 'read'));
    expect(outcome(await invite(token, 'viewer'))).toEqual(refusedToGrant('viewer', 'read'));
    expect(await roleOf(user.id)).toBeNull();
  });

  it('manage_members + read grants viewer, not member or admin', async () => {
    const token = (await createJwt(owner, projectId, ['read', 'manage_members'])).accessToken;
    const user = fresh();
    expect(outcome(await add(token, user.id, 'viewer'))).toEqual({ status: 201 });
    expect(outcome(await invite(token, 'viewer'))).toEqual({ status: 201 });
    expect(outcome(await promote(token, user.id, 'member'))).toEqual(refusedToGrant('member', 'write'));
    expect(outcome(await add(token, fresh().id, 'admin'))).toEqual(refusedToGrant('admin', 'write'));
    expect(outcome(await invite(token, 'member'))).toEqual(refusedToGrant('member', 'write'));
    expect(await roleOf(user.id)).toBe('viewer');
  });

  it('manage_members + read + write grants member, not admin', async () => {
    const token = (await createJwt(owner, projectId, ['read', 'write', 'manage_members'])).accessToken;
    const user = fresh();
    expect(outcome(await add(token, user.id, 'member'))).toEqual({ status: 201 });
    expect(outcome(await invite(token, 'member'))).toEqual({ status: 201 });
    expect(outcome(await promote(token, user.id, 'admin'))).toEqual(refusedToGrant('admin', 'delete'));
    expect(outcome(await invite(token, 'admin'))).toEqual(refusedToGrant('admin', 'delete'));
    expect(await roleOf(user.id)).toBe('member');
  });

  it('a token holding every scope grants admin but never owner', async () => {
    const token = (await createJwt(owner, projectId, ['read', 'write', 'delete', 'manage_settings', 'manage_members'])).accessToken;
    const user = fresh();
    expect(outcome(await add(token, user.id, 'admin'))).toEqual({ status: 201 });
    expect(outcome(await invite(token, 'admin'))).toEqual({ status: 201 });
    expect((await promote(token, user.id, 'owner')).status).toBe(403);
    expect(await roleOf(user.id)).toBe('admin');
  });

  it('personal tokens grant by tier: read and write none, admin up to admin, owner only with owner actions', async () => {
    const tiers = {
      read: (await createPersonalToken(owner, { tier: 'read' })).value,
      write: (await createPersonalToken(owner, { tier: 'write' })).value,
      admin: (await createPersonalToken(owner, { tier: 'admin' })).value,
      owner: (await createPersonalToken(owner, { tier: 'admin', allowOwnerActions: true })).value,
    };
    const user = fresh();
    expect(outcome(await add(tiers.read, user.id, 'viewer'))).toEqual({ status: 403, body: { error: 'Forbidden', message: 'Forbidden: personal access token is read-only' } });
    expect(outcome(await add(tiers.write, user.id, 'viewer'))).toEqual({ status: 403, body: { error: 'Forbidden', message: 'Forbidden: personal access token lacks the admin tier' } });
    expect(outcome(await add(tiers.admin, user.id, 'admin'))).toEqual({ status: 201 });
    expect((await promote(tiers.admin, user.id, 'owner')).status).toBe(403);
    expect(await roleOf(user.id)).toBe('admin');
    expect(outcome(await promote(tiers.owner, user.id, 'owner'))).toEqual({ status: 200 });
    expect(await roleOf(user.id)).toBe('owner');
  });
});
