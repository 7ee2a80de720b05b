import { createHash } from 'node:crypto';
import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';
import { addMember, createJwt, createOpaque, createPersonalToken, createProject } from '../tokens/support';

let app: TestApp;
let user: TestUser;

beforeAll(async () => {
  app = await startTestApp();
  user = await app.signup({ verified: true });
});
afterAll(() => app?.stop());

const PATS = '/api/users/me/personal-tokens';
const DAY = 24 * 3600_000;
const sha256 = (v: string) => createHash('sha256').update(v).digest('hex');

describe('creating and listing', () => {
  it('returns an fgp_ secret once, stores only its hash and last four, and lists without either', async () => {
    const before = Date.now();
    const res = await user.request('POST', PATS, { name: 'laptop', tier: 'write' });
    expect(res.status).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body.value).toMatch(/^fgp_[0-9a-f]{64}$/);
    expect(res.body.token).toEqual({
      id: expect.any(String),
      name: 'laptop',
      tier: 'write',
      allowOwnerActions: false,
      lastFour: res.body.value.slice(-4),
      expiresInDays: 90,
      expiresAt: expect.any(String),
      expired: false,
      createdAt: expect.any(String),
      lastUsedAt: null,
      rotatedFrom: null,
    });
    const expiresAt = Date.parse(res.body.token.expiresAt);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 90 * DAY - 1000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 90 * DAY + 1000);

    const [row] = await app.platform.db.sql`SELECT * FROM personal_tokens WHERE id = ${res.body.token.id}`;
    expect(row.secret_hash).toBe(sha256(res.body.value));
    expect(row.last_four).toBe(res.body.value.slice(-4));
    expect(JSON.stringify(row)).not.toContain(res.body.value);

    const list = await user.request('GET', PATS);
    expect(list.status).toBe(200);
    expect(list.body.tokens.find((t: { id: string }) => t.id === res.body.token.id)).toEqual(res.body.token);
    expect(list.text).not.toContain(res.body.value);
    expect(list.text).not.toContain(row.secret_hash);
  });

  it('accepts each allowed lifetime and owner actions on the admin tier', async () => {
    for (const days of [7, 30, 90, 180, 365]) {
      const before = Date.now();
      const res = await user.request('POST', PATS, { name: `d${days}`, tier: 'read', expiresInDays: days });
      expect(res.status).toBe(201);
      expect(res.body.token.expiresInDays).toBe(days);
      // Between the request and its answer, however long that took (1 s for the clocks' rounding).
      expect(Date.parse(res.body.token.expiresAt)).toBeGreaterThanOrEqual(before + days * DAY - 1000);
      expect(Date.parse(res.body.token.expiresAt)).toBeLessThanOrEqual(Date.now() + days * DAY + 1000);
      await user.request('DELETE', `${PATS}/${res.body.token.id}`);
    }
    const owner = await user.request('POST', PATS, { name: 'ops', tier: 'admin', allowOwnerActions: true });
    expect(owner.status).toBe(201);
    expect(owner.body.token).toMatchObject({ tier: 'admin', allowOwnerActions: true });
    await user.request('DELETE', `${PATS}/${owner.body.token.id}`);
  });

  it('refuses bad input with 400 and creates nothing', async () => {
    const before = (await user.request('GET', PATS)).body.tokens.length;
    const cases: [unknown, string][] = [
      [{ name: 'x', tier: 'write', expiresInDays: 10 }, 'body.expiresInDays'],
      [{ name: 'x', tier: 'write', expiresInDays: 0 }, 'body.expiresInDays'],
      [{ name: 'x', tier: 'write', expiresInDays: '30' }, 'body.expiresInDays'],
      [{ name: 'x', tier: 'write', allowOwnerActions: true }, 'body.allowOwnerActions'],
      [{ name: 'x', tier: 'read', allowOwnerActions: true }, 'body.allowOwnerActions'],
      [{ name: 'x', tier: 'owner' }, 'body.tier'],
      [{ name: 'x' }, 'body.tier'],
      [{ name: '', tier: 'read' }, 'body.name'],
      [{ name: 'x', tier: 'read', scopes: ['read'] }, 'body'],
    ];
    for (const [body, path] of cases) {
      const res = await user.request('POST', PATS, body);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(res.body.details.some((d: { path: string }) => d.path.startsWith(path))).toBe(true);
    }
    expect((await user.request('GET', PATS)).body.tokens.length).toBe(before);
  });

  it('allows at most 20 active tokens (409); expired and revoked ones do not count', async () => {
    const u = await app.signup({ verified: true });
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await createPersonalToken(u, { tier: 'read', name: `t${i}` })).token.id);
    const over = await u.request('POST', PATS, { name: 'one too many', tier: 'read' });
    expect(over.status).toBe(409);
    expect(over.body).toEqual({ error: 'Conflict', message: expect.stringContaining('20') });

    expect((await u.request('DELETE', `${PATS}/${ids[0]}`)).status).toBe(204);
    expect((await u.request('POST', PATS, { name: 'after revoke', tier: 'read' })).status).toBe(201);
    expect((await u.request('POST', PATS, { name: 'full again', tier: 'read' })).status).toBe(409);

    await app.platform.db.sql`UPDATE personal_tokens SET expires_at = now() - interval '1 second' WHERE id = ${ids[1]}`;
    expect((await u.request('POST', PATS, { name: 'after expiry', tier: 'read' })).status).toBe(201);
    const listed = (await u.request('GET', PATS)).body.tokens;
    expect(listed.find((t: { id: string }) => t.id === ids[1]).expired).toBe(true);
  });

  it('serialises concurrent creates so the limit holds', async () => {
    const u = await app.signup({ verified: true });
    for (let i = 0; i < 18; i++) await createPersonalToken(u, { tier: 'read', name: `t${i}` });
    const results = await Promise.all([1, 2, 3, 4].map((i) => u.request('POST', PATS, { name: `race${i}`, tier: 'read' })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 201, 409, 409]);
  });
});

describe('verified e-mail', () => {
  it('is required to create or rotate (403 EMAIL_NOT_VERIFIED); list and revoke still work', async () => {
    const u = await app.signup({ verified: true });
    const existing = await createPersonalToken(u, { tier: 'read' });
    await app.platform.db.sql`UPDATE users SET email_verified = false WHERE id = ${u.id}`;

    const create = await u.request('POST', PATS, { name: 'x', tier: 'read' });
    expect(create.status).toBe(403);
    expect(create.body).toEqual({ error: 'Verify your email address first', code: 'EMAIL_NOT_VERIFIED', message: expect.stringMatching(/^Forbidden: /) });
    const rotate = await u.request('POST', `${PATS}/${existing.token.id}/rotate`);
    expect(rotate.status).toBe(403);
    expect(rotate.body.code).toBe('EMAIL_NOT_VERIFIED');
    expect((await app.request('GET', '/api/users/me', { token: existing.value })).status).toBe(200);

    expect((await u.request('GET', PATS)).body.tokens).toHaveLength(1);
    expect((await u.request('DELETE', `${PATS}/${existing.token.id}`)).status).toBe(204);
    expect((await u.request('GET', PATS)).body.tokens).toHaveLength(0);
  });

  it('a fresh, unverified signup cannot create one', async () => {
    const u = await app.signup();
    const res = await u.request('POST', PATS, { name: 'x', tier: 'read' });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('EMAIL_NOT_VERIFIED');
  });
});

describe('management only from a dashboard session', () => {
  it('refuses every token kind on all four endpoints, anonymous gets 401, and CSRF is required', async () => {
    const projectId = await createProject(user);
    const admin = await createPersonalToken(user, { tier: 'admin', allowOwnerActions: true });
    const opaque = await createOpaque(user, projectId, { read: true, write: true, delete: true });
    const jwt = await createJwt(user, projectId, ['read', 'write', 'delete', 'manage_settings', 'manage_members']);
    const calls: [string, string, unknown][] = [
      ['GET', PATS, undefined],
      ['POST', PATS, { name: 'x', tier: 'read' }],
      ['DELETE', `${PATS}/${admin.token.id}`, undefined],
      ['POST', `${PATS}/${admin.token.id}/rotate`, undefined],
    ];
    for (const token of [admin.value, opaque.value, jwt.accessToken]) {
      for (const [method, path, body] of calls) {
        const res = await app.request(method, path, { token, body });
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 403 });
        expect(res.body.message).toBe('Forbidden: personal tokens cannot do this');
      }
    }
    for (const [method, path, body] of calls) expect((await app.request(method, path, { body })).status).toBe(401);
    const noCsrf = await app.request('POST', PATS, { cookie: user.cookie, body: { name: 'x', tier: 'read' } });
    expect(noCsrf.status).toBe(403);
    expect((await app.request('GET', '/api/users/me', { token: admin.value })).status).toBe(200);
  });
});

describe('rotate', () => {
  it('keeps name, tier, owner actions and lifetime; the old secret dies at once', async () => {
    const old = await createPersonalToken(user, { name: 'deploy bot', tier: 'admin', allowOwnerActions: true, expiresInDays: 30 });
    expect((await app.request('GET', '/api/users/me', { token: old.value })).status).toBe(200);
    const before = Date.now();
    const res = await user.request('POST', `${PATS}/${old.token.id}/rotate`);
    const after = Date.now();
    expect(res.status).toBe(200);
    expect(res.body.rotatedFrom).toBe(old.token.id);
    expect(res.body.value).toMatch(/^fgp_[0-9a-f]{64}$/);
    expect(res.body.value).not.toBe(old.value);
    expect(res.body.token).toMatchObject({ name: 'deploy bot', tier: 'admin', allowOwnerActions: true, expiresInDays: 30, rotatedFrom: old.token.id, lastFour: res.body.value.slice(-4) });
    expect(res.body.token.id).not.toBe(old.token.id);
    expect(Date.parse(res.body.token.expiresAt)).toBeGreaterThanOrEqual(before + 30 * DAY - 1000);
    expect(Date.parse(res.body.token.expiresAt)).toBeLessThanOrEqual(after + 30 * DAY + 1000);

    expect((await app.request('GET', '/api/users/me', { token: old.value })).status).toBe(401);
    const me = await app.request('GET', '/api/users/me', { token: res.body.value });
    expect(me.body.credential).toEqual({ type: 'personal_access_token', id: res.body.token.id, tier: 'admin', allowOwnerActions: true });
    const ids = (await user.request('GET', PATS)).body.tokens.map((t: { id: string }) => t.id);
    expect(ids).toContain(res.body.token.id);
    expect(ids).not.toContain(old.token.id);
    // The replaced token cannot be rotated again.
    expect((await user.request('POST', `${PATS}/${old.token.id}/rotate`)).status).toBe(404);
  });

  it('takes a new lifetime when given, validates it, and refuses expired, revoked and foreign tokens', async () => {
    const t = await createPersonalToken(user, { tier: 'read', expiresInDays: 7 });
    expect((await user.request('POST', `${PATS}/${t.token.id}/rotate`, { expiresInDays: 45 })).status).toBe(400);
    expect((await user.request('POST', `${PATS}/${t.token.id}/rotate`, { tier: 'admin' })).status).toBe(400);
    const res = await user.request('POST', `${PATS}/${t.token.id}/rotate`, { expiresInDays: 365 });
    expect(res.status).toBe(200);
    expect(res.body.token).toMatchObject({ tier: 'read', expiresInDays: 365 });

    const expired = await createPersonalToken(user, { tier: 'read' });
    await app.platform.db.sql`UPDATE personal_tokens SET expires_at = now() - interval '1 second' WHERE id = ${expired.token.id}`;
    const refused = await user.request('POST', `${PATS}/${expired.token.id}/rotate`);
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/expired/);
    expect((await app.request('GET', '/api/users/me', { token: expired.value })).status).toBe(401);

    const other = await app.signup({ verified: true });
    const theirs = await createPersonalToken(other, { tier: 'read' });
    expect((await user.request('POST', `${PATS}/${theirs.token.id}/rotate`)).status).toBe(404);
    expect((await user.request('DELETE', `${PATS}/${theirs.token.id}`)).status).toBe(404);
    expect((await app.request('GET', '/api/users/me', { token: theirs.value })).status).toBe(200);
  });
});

describe('revoke', () => {
  it('is immediate, then 404', async () => {
    const t = await createPersonalToken(user, { tier: 'write' });
    expect((await app.request('GET', '/api/users/me', { token: t.value })).status).toBe(200);
    expect((await user.request('DELETE', `${PATS}/${t.token.id}`)).status).toBe(204);
    expect((await app.request('GET', '/api/users/me', { token: t.value })).status).toBe(401);
    expect((await user.request('DELETE', `${PATS}/${t.token.id}`)).status).toBe(404);
  });
});

describe('acting as the user', () => {
  it('reports itself on /api/users/me with the user and records last use', async () => {
    const t = await createPersonalToken(user, { tier: 'read' });
    const me = await app.request('GET', '/api/users/me', { token: t.value });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: user.id, email: user.email, credential: { type: 'personal_access_token', id: t.token.id, tier: 'read', allowOwnerActions: false } });
    // Recorded off the request path (at most once a minute per token).
    await eventually(async () => (await user.request('GET', PATS)).body.tokens.find((x: { id: string }) => x.id === t.token.id).lastUsedAt, 30_000);
  });

  it('enforces the tiers with the documented messages', async () => {
    const projectId = await createProject(user);
    const read = await createPersonalToken(user, { tier: 'read' });
    const write = await createPersonalToken(user, { tier: 'write' });
    const admin = await createPersonalToken(user, { tier: 'admin' });

    expect((await app.request('GET', `/api/projects/${projectId}`, { token: read.value })).status).toBe(200);
    const readWrite = await app.request('PATCH', `/api/projects/${projectId}`, { token: read.value, body: { description: 'x' } });
    expect(readWrite.body.message).toBe('Forbidden: personal access token is read-only');
    const readCreate = await app.request('POST', '/api/services', { token: read.value, body: { projectId, name: 'svc' } });
    expect(readCreate.status).toBe(403);
    expect(readCreate.body.message).toBe('Forbidden: personal access token is read-only');

    const service = await app.request('POST', '/api/services', { token: write.value, body: { projectId, name: 'svc' } });
    expect(service.status).toBe(201);
    const writeSettings = await app.request('PATCH', `/api/projects/${projectId}`, { token: write.value, body: { description: 'x' } });
    expect(writeSettings.status).toBe(403);
    expect(writeSettings.body.message).toBe('Forbidden: personal access token lacks the admin tier');
    const writeProject = await app.request('POST', '/api/projects', { token: write.value, body: { name: 'nope' } });
    expect(writeProject.body.message).toBe('Forbidden: personal access token lacks the admin tier');

    expect((await app.request('PATCH', `/api/projects/${projectId}`, { token: admin.value, body: { description: 'by admin token' } })).status).toBe(200);
    const del = await app.request('DELETE', `/api/projects/${projectId}`, { token: admin.value });
    expect(del.status).toBe(403);
    expect(del.body.message).toBe('Forbidden: this action needs an admin token created with owner actions allowed');
    const invite = await app.request('POST', `/api/projects/${projectId}/invitations`, { token: admin.value, body: { email: 'a@example.com', role: 'viewer' } });
    expect(invite.body.message).toBe('Forbidden: personal tokens cannot do this');
  });

  it('owner actions need the opt-in and the owner role', async () => {
    const projectId = await createProject(user);
    const ownerActions = await createPersonalToken(user, { tier: 'admin', allowOwnerActions: true });
    const adminUser = await app.signup({ verified: true });
    await addMember(user, projectId, adminUser.id, 'admin');
    const adminsToken = await createPersonalToken(adminUser, { tier: 'admin', allowOwnerActions: true });
    const refused = await app.request('DELETE', `/api/projects/${projectId}`, { token: adminsToken.value });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe("Forbidden: You need 'delete_project' permission");
    expect((await app.request('DELETE', `/api/projects/${projectId}`, { token: ownerActions.value })).status).toBe(204);
  });

  it("never goes beyond the user's role, and losing access removes it", async () => {
    const projectId = await createProject(user);
    const viewer = await app.signup({ verified: true });
    await addMember(user, projectId, viewer.id, 'viewer');
    const pat = await createPersonalToken(viewer, { tier: 'admin' });
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: pat.value })).status).toBe(200);
    const write = await app.request('POST', '/api/services', { token: pat.value, body: { projectId, name: 'svc' } });
    expect(write.status).toBe(403);
    expect(write.body.message).toBe("Forbidden: You need 'write' permission");

    expect((await user.request('DELETE', `/api/projects/${projectId}/members/${viewer.id}`)).status).toBe(204);
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: pat.value })).status).toBe(404);
  });

  it('refuses an expired token with 401', async () => {
    const t = await createPersonalToken(user, { tier: 'read' });
    await app.platform.db.sql`UPDATE personal_tokens SET expires_at = now() - interval '1 second' WHERE id = ${t.token.id}`;
    expect((await app.request('GET', '/api/users/me', { token: t.value })).status).toBe(401);
    expect((await app.request('GET', '/api/users/me', { token: `fgp_${'a'.repeat(64)}` })).status).toBe(401);
    expect((await app.request('GET', '/api/users/me', { token: `fgp_${'A'.repeat(64)}` })).status).toBe(401);
  });
});
