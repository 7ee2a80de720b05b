import { createHash } from 'node:crypto';
import { JwtRevocationList } from '../../api/features/tokens/revocation';
import { createLogger } from '../../api/infra/logger';
import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';
import { addMember, appSigningKey, createJwt, createOpaque, createPersonalToken, createProject, decodeJwtPart, foreignEd25519Key, loadJose } from './support';

let app: TestApp;
let owner: TestUser;
let projectId: string;

beforeAll(async () => {
  app = await startTestApp();
  owner = await app.signup({ verified: true });
  projectId = await createProject(owner);
});
afterAll(() => app?.stop());

const sha256 = (v: string) => createHash('sha256').update(v).digest('hex');
const tokensPath = (id = projectId) => `/api/projects/${id}/tokens`;

describe('opaque project tokens', () => {
  it('shows the fgr_ secret once, stores only its SHA-256, and lists the record without it', async () => {
    const res = await owner.request('POST', tokensPath(), { name: 'ci reader', permissions: { read: true } });
    expect(res.status).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body.value).toMatch(/^fgr_[0-9a-f]{64}$/);
    expect(res.body.token).toEqual({
      id: expect.any(String),
      projectId,
      name: 'ci reader',
      tokenType: 'opaque',
      permissions: { read: true, write: false, delete: false },
      expiresAt: null,
      createdAt: expect.any(String),
      createdBy: owner.id,
      lastUsedAt: null,
      scope: null,
    });

    const [row] = await app.platform.db.sql`SELECT * FROM project_tokens WHERE id = ${res.body.token.id}`;
    expect(row.secret_hash).toBe(sha256(res.body.value));
    expect(JSON.stringify(row)).not.toContain(res.body.value);

    const list = await owner.request('GET', tokensPath());
    expect(list.status).toBe(200);
    const listed = list.body.tokens.find((t: { id: string }) => t.id === res.body.token.id);
    expect(listed).toMatchObject({ name: 'ci reader', tokenType: 'opaque' });
    expect(list.text).not.toContain(res.body.value);
    expect(list.text).not.toContain(row.secret_hash);
  });

  it('authenticates as the project with exactly its permissions and describes itself on /api/users/me', async () => {
    const { token, value } = await createOpaque(owner, projectId, { read: true });
    const me = await app.request('GET', '/api/users/me', { token: value });
    expect(me.status).toBe(200);
    expect(me.body.credential).toEqual({ type: 'project_api_token', id: token.id, tokenType: 'opaque', scopes: ['read'], projectId });

    expect((await app.request('GET', `/api/projects/${projectId}`, { token: value })).status).toBe(200);
    const settings = await app.request('GET', tokensPath(), { token: value });
    expect(settings.status).toBe(403);
    expect(settings.body).toEqual({ error: 'Forbidden', message: "Forbidden: You need 'manage_settings' permission" });
    // No CSRF needed for bearer tokens, and the write still needs its permission.
    const write = await app.request('PATCH', `/api/projects/${projectId}`, { token: value, body: { description: 'x' } });
    expect(write.status).toBe(403);

    // Recorded off the request path (at most once a minute per token).
    await eventually(async () => (await app.platform.db.sql`SELECT last_used_at FROM project_tokens WHERE id = ${token.id}`)[0].last_used_at, 30_000);
  });

  it('refuses an unknown, malformed or expired secret with 401', async () => {
    expect((await app.request('GET', '/api/users/me', { token: `fgr_${'0'.repeat(64)}` })).status).toBe(401);
    expect((await app.request('GET', '/api/users/me', { token: 'fgr_short' })).status).toBe(401);
    const bad = await app.request('GET', '/api/users/me', { token: 'not-a-known-kind' });
    expect(bad.status).toBe(401);
    expect(bad.body).toEqual({ error: 'Unauthorized', message: expect.any(String) });

    // Seconds of margin so a loaded machine still uses it before it expires; then wait until it has.
    const expiresAtMs = Date.now() + 5000;
    const expiresAt = new Date(expiresAtMs).toISOString();
    const { token, value } = await createOpaque(owner, projectId, { read: true }, { expiresAt });
    expect(token).toMatchObject({ expiresAt });
    expect((await app.request('GET', '/api/users/me', { token: value })).status).toBe(200);
    while (Date.now() < expiresAtMs + 50) await new Promise((r) => setTimeout(r, expiresAtMs + 50 - Date.now()));
    expect((await app.request('GET', '/api/users/me', { token: value })).status).toBe(401);
  });

  it('revokes at once (204), then 404 for the same id, with token.create and token.revoke audited', async () => {
    const { token, value } = await createOpaque(owner, projectId, { read: true, write: true });
    expect((await app.request('GET', '/api/users/me', { token: value })).status).toBe(200);
    const del = await owner.request('DELETE', `${tokensPath()}/${token.id}`);
    expect(del.status).toBe(204);
    expect((await app.request('GET', '/api/users/me', { token: value })).status).toBe(401);
    expect((await owner.request('DELETE', `${tokensPath()}/${token.id}`)).status).toBe(404);
    expect((await owner.request('GET', tokensPath())).body.tokens.map((t: { id: string }) => t.id)).not.toContain(token.id);

    const audit = await app.platform.db.sql<{ action: string; user_id: string; resource_type: string }[]>`
      SELECT action, user_id, resource_type FROM audit_logs WHERE resource_id = ${token.id} ORDER BY timestamp`;
    expect(audit).toEqual([
      { action: 'token.create', user_id: owner.id, resource_type: 'token' },
      { action: 'token.revoke', user_id: owner.id, resource_type: 'token' },
    ]);
  });

  it('refuses bad input with 400 and creates nothing', async () => {
    const before = (await owner.request('GET', tokensPath())).body.tokens.length;
    const cases: [unknown, string][] = [
      [{ name: 'x' }, 'body.permissions'],
      [{ name: 'x', permissions: { read: false, write: false, delete: false } }, 'body.permissions'],
      [{ name: 'x', permissions: { read: true, admin: true } }, 'body.permissions'],
      [{ name: 'x', permissions: { read: true }, scopes: ['read'] }, 'body'],
      [{ name: 'x', permissions: { read: true }, expiresAt: new Date(Date.now() - 1000).toISOString() }, 'body.expiresAt'],
      [{ name: 'x', permissions: { read: true }, expiresAt: 'tomorrow' }, 'body.expiresAt'],
      [{ name: '', permissions: { read: true } }, 'body.name'],
      [{ name: 'x', permissions: { read: true }, extra: 1 }, 'body'],
      [{ name: 'x', scopes: [] }, 'body.scopes'],
      [{ name: 'x', scopes: ['read', 'read'] }, 'body.scopes'],
      [{ name: 'x', scopes: ['admin'] }, 'body.scopes'],
      [{ name: 'x', scopes: ['read'], expiresAt: new Date(Date.now() + 60_000).toISOString() }, 'body.expiresAt'],
      [{ name: 'x', tokenType: 'jwt', permissions: { read: true } }, 'body'],
    ];
    for (const [body, path] of cases) {
      const res = await owner.request('POST', tokensPath(), body);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(res.body.details.some((d: { path: string }) => d.path.startsWith(path))).toBe(true);
    }
    expect((await owner.request('GET', tokensPath())).body.tokens.length).toBe(before);
  });
});

describe('who may manage project tokens', () => {
  it('needs manage_settings: members and viewers get 403, outsiders 404, anonymous 401', async () => {
    const member = await app.signup();
    const viewer = await app.signup();
    const outsider = await app.signup();
    await addMember(owner, projectId, member.id, 'member');
    await addMember(owner, projectId, viewer.id, 'viewer');
    const { token } = await createOpaque(owner, projectId, { read: true });

    for (const user of [member, viewer]) {
      for (const [method, path, body] of [
        ['GET', tokensPath(), undefined],
        ['POST', tokensPath(), { name: 'x', permissions: { read: true } }],
        ['DELETE', `${tokensPath()}/${token.id}`, undefined],
      ] as const) {
        const res = await user.request(method, path, body);
        expect(res.status).toBe(403);
        expect(res.body.message).toBe("Forbidden: You need 'manage_settings' permission");
      }
    }
    expect((await outsider.request('GET', tokensPath())).status).toBe(404);
    expect((await outsider.request('POST', tokensPath(), { name: 'x', permissions: { read: true } })).status).toBe(404);
    expect((await outsider.request('DELETE', `${tokensPath()}/${token.id}`)).status).toBe(404);
    expect((await app.request('GET', tokensPath())).status).toBe(401);
    expect((await app.request('GET', tokensPath('prj_missing'))).status).toBe(401);
    expect((await owner.request('GET', tokensPath('prj_missing'))).status).toBe(404);
  });

  it('lets an admin member manage tokens, and requires CSRF from a cookie session', async () => {
    const admin = await app.signup();
    await addMember(owner, projectId, admin.id, 'admin');
    const created = await admin.request('POST', tokensPath(), { name: 'by admin', scopes: ['read'] });
    expect(created.status).toBe(201);
    const noCsrf = await app.request('POST', tokensPath(), { cookie: admin.cookie, body: { name: 'x', permissions: { read: true } } });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body.message).toMatch(/^Forbidden: .*CSRF/);
    expect((await admin.request('DELETE', `${tokensPath()}/${created.body.token.id}`)).status).toBe(204);
  });

  it('never lets a token of one project work on another (BOLA)', async () => {
    const otherProject = await createProject(owner);
    const mine = await createJwt(owner, projectId, ['read', 'write', 'delete', 'manage_settings', 'manage_members']);
    const opaque = await createOpaque(owner, projectId, { read: true, write: true, delete: true });
    const theirs = await createOpaque(owner, otherProject, { read: true });

    for (const token of [mine.accessToken, opaque.value]) {
      expect((await app.request('GET', tokensPath(otherProject), { token })).status).toBe(404);
      expect((await app.request('GET', `/api/projects/${otherProject}`, { token })).status).toBe(404);
      expect((await app.request('DELETE', `${tokensPath(otherProject)}/${theirs.token.id}`, { token })).status).toBe(404);
      expect((await app.request('POST', tokensPath(otherProject), { token, body: { name: 'x', permissions: { read: true } } })).status).toBe(404);
    }
    // A token id of another project is not found under this project's path.
    expect((await owner.request('DELETE', `${tokensPath()}/${theirs.token.id}`)).status).toBe(404);
    expect((await app.request('GET', '/api/users/me', { token: theirs.value })).status).toBe(200);
  });

  it('lets a manage_settings token create tokens, but never with more than it holds', async () => {
    const manager = await createJwt(owner, projectId, ['read', 'manage_settings']);
    const ok = await app.request('POST', tokensPath(), { token: manager.accessToken, body: { name: 'child', permissions: { read: true } } });
    expect(ok.status).toBe(201);
    expect(ok.body.token.createdBy).toBe(owner.id);
    const escalate = await app.request('POST', tokensPath(), { token: manager.accessToken, body: { name: 'child', scopes: ['write'] } });
    expect(escalate.status).toBe(403);
    expect(escalate.body.message).toBe("Forbidden: You need 'write' permission to grant it to a new token");
    const members = await app.request('POST', tokensPath(), { token: manager.accessToken, body: { name: 'child', scopes: ['manage_members'] } });
    expect(members.status).toBe(403);
  });

  it('personal tokens: admin tier lists and revokes but never creates; lower tiers are refused', async () => {
    const admin = await createPersonalToken(owner, { tier: 'admin' });
    const write = await createPersonalToken(owner, { tier: 'write' });
    const read = await createPersonalToken(owner, { tier: 'read' });
    const victim = await createOpaque(owner, projectId, { read: true });

    expect((await app.request('GET', tokensPath(), { token: admin.value })).status).toBe(200);
    const create = await app.request('POST', tokensPath(), { token: admin.value, body: { name: 'x', permissions: { read: true } } });
    expect(create.status).toBe(403);
    expect(create.body.message).toBe('Forbidden: personal tokens cannot do this');

    for (const pat of [write, read]) {
      const list = await app.request('GET', tokensPath(), { token: pat.value });
      expect(list.status).toBe(403);
      expect(list.body.message).toBe('Forbidden: personal access token lacks the admin tier');
    }
    expect((await app.request('DELETE', `${tokensPath()}/${victim.token.id}`, { token: write.value })).body.message).toBe(
      'Forbidden: personal access token lacks the admin tier',
    );
    expect((await app.request('DELETE', `${tokensPath()}/${victim.token.id}`, { token: read.value })).body.message).toBe(
      'Forbidden: personal access token is read-only',
    );
    expect((await app.request('DELETE', `${tokensPath()}/${victim.token.id}`, { token: admin.value })).status).toBe(204);
    expect((await app.request('GET', '/api/users/me', { token: victim.value })).status).toBe(401);
  });

  it("a personal token never goes beyond its user's role", async () => {
    const member = await app.signup({ verified: true });
    await addMember(owner, projectId, member.id, 'member');
    const pat = await createPersonalToken(member, { tier: 'admin' });
    const res = await app.request('GET', tokensPath(), { token: pat.value });
    expect(res.status).toBe(403);
    expect(res.body.message).toBe("Forbidden: You need 'manage_settings' permission");
  });
});

describe('GET /api/users/me/tokens', () => {
  it("lists the caller's live tokens across projects and nobody else's", async () => {
    const me = await app.signup({ verified: true });
    const p1 = await createProject(me);
    const p2 = await createProject(me);
    const a = await createOpaque(me, p1, { read: true });
    const b = await createJwt(me, p2, ['read']);
    const revoked = await createOpaque(me, p2, { write: true });
    await me.request('DELETE', `${tokensPath(p2)}/${revoked.token.id}`);
    await createOpaque(owner, projectId, { read: true });

    const res = await me.request('GET', '/api/users/me/tokens');
    expect(res.status).toBe(200);
    expect(res.body.tokens.map((t: { id: string }) => t.id).sort()).toEqual([a.token.id, b.token.id].sort());
    expect(res.text).not.toMatch(/fgr_|eyJ/);

    const pat = await createPersonalToken(me, { tier: 'read' });
    expect((await app.request('GET', '/api/users/me/tokens', { token: pat.value })).body.tokens).toHaveLength(2);
    const asProjectToken = await app.request('GET', '/api/users/me/tokens', { token: a.value });
    expect(asProjectToken.status).toBe(403);
    expect((await app.request('GET', '/api/users/me/tokens')).status).toBe(401);
  });
});

describe('JWT project tokens', () => {
  it('issues an EdDSA access/refresh pair with a kid and exactly the documented claims', async () => {
    const before = Math.floor(Date.now() / 1000);
    const res = await owner.request('POST', tokensPath(), { name: 'deployer', scopes: ['read', 'write'] });
    expect(res.status).toBe(201);
    expect(res.body.token).toEqual({
      id: expect.any(String),
      projectId,
      name: 'deployer',
      tokenType: 'jwt',
      scopes: ['read', 'write'],
      expiresAt: res.body.refreshTokenExpiresAt,
      createdAt: expect.any(String),
      createdBy: owner.id,
      scope: null,
    });
    const header = decodeJwtPart(res.body.accessToken, 0);
    expect(header).toEqual({ alg: 'EdDSA', kid: expect.any(String), typ: 'JWT' });
    const access = decodeJwtPart(res.body.accessToken, 1);
    expect(Object.keys(access).sort()).toEqual(['aud', 'exp', 'iat', 'iss', 'jti', 'projectId', 'scopes', 'sub', 'tokenId', 'type']);
    expect(access).toMatchObject({ sub: res.body.token.id, tokenId: res.body.token.id, projectId, scopes: ['read', 'write'], type: 'access', iss: 'flagship', aud: 'flagship-api' });
    expect(access.iat as number).toBeGreaterThanOrEqual(before);
    expect((access.exp as number) - (access.iat as number)).toBe(24 * 3600);
    const refresh = decodeJwtPart(res.body.refreshToken, 1);
    expect(refresh).toMatchObject({ type: 'refresh', tokenId: res.body.token.id });
    expect(refresh.jti).not.toBe(access.jti);
    expect((refresh.exp as number) - (refresh.iat as number)).toBe(30 * 24 * 3600);
    expect(Date.parse(res.body.accessTokenExpiresAt)).toBe((access.exp as number) * 1000);

    const me = await app.request('GET', '/api/users/me', { token: res.body.accessToken });
    expect(me.status).toBe(200);
    // The token, never its creator.
    expect(me.body).toEqual({ credential: { type: 'project_api_token', id: res.body.token.id, tokenType: 'jwt', scopes: ['read', 'write'], projectId } });

    const jwks = await app.request('GET', '/.well-known/jwks.json');
    expect(jwks.status).toBe(200);
    expect(jwks.body.keys).toEqual([expect.objectContaining({ kty: 'OKP', crv: 'Ed25519', kid: header.kid, alg: 'EdDSA', use: 'sig' })]);
    expect(jwks.body.keys[0].d).toBeUndefined();
  });

  it('grants exactly its scopes', async () => {
    const reader = await createJwt(owner, projectId, ['read']);
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: reader.accessToken })).status).toBe(200);
    expect((await app.request('GET', tokensPath(), { token: reader.accessToken })).status).toBe(403);
    const settings = await createJwt(owner, projectId, ['manage_settings']);
    expect((await app.request('GET', tokensPath(), { token: settings.accessToken })).status).toBe(200);
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: settings.accessToken })).status).toBe(403);
  });

  it('refuses alg none, a foreign key, HS256 key confusion, wrong iss or aud, expiry, unknown kid and a refresh token as access', async () => {
    const jose = await loadJose();
    const real = await createJwt(owner, projectId, ['read']);
    const claims = decodeJwtPart(real.accessToken, 1);
    const { kid } = decodeJwtPart(real.accessToken, 0) as { kid: string };
    const { key } = appSigningKey(app);
    const now = Math.floor(Date.now() / 1000);
    const sign = (payload: Record<string, unknown>, header: Record<string, unknown> = { alg: 'EdDSA', kid }, signingKey: unknown = key) =>
      new jose.SignJWT({ ...claims, ...payload }).setProtectedHeader(header as never).sign(signingKey as never);

    // The crafting is sound: the same claims signed with the real key are accepted.
    const control = await sign({ jti: 'jti_control', iat: now, exp: now + 600 });
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: control })).status).toBe(200);

    const none = new jose.UnsecuredJWT({ ...claims }).encode();
    const publicPem = (await app.request('GET', '/.well-known/jwks.json')).body.keys[0].x as string;
    const bad = [
      none,
      `${Buffer.from(JSON.stringify({ alg: 'none', kid })).toString('base64url')}.${real.accessToken.split('.')[1]}.`,
      await sign({}, { alg: 'EdDSA', kid }, foreignEd25519Key()),
      await sign({}, { alg: 'HS256', kid }, new TextEncoder().encode(publicPem)),
      await sign({ iss: 'someone-else' }),
      await sign({ aud: 'another-api' }),
      await sign({ iat: now - 7200, exp: now - 3600 }),
      await sign({}, { alg: 'EdDSA', kid: 'unknown-kid' }),
      await sign({ type: 'refresh' }),
      await sign({ scopes: ['read', 'superuser'] }),
      await sign({ sub: 'tok_other' }),
      real.refreshToken,
      `${real.accessToken.slice(0, -4)}AAAA`,
    ];
    for (const token of bad) {
      const res = await app.request('GET', `/api/projects/${projectId}`, { token });
      expect({ token, status: res.status }).toEqual({ token, status: 401 });
    }
  });

  it('refresh rotates both tokens, the old refresh is dead at once, and the earlier access token runs out on its own', async () => {
    const first = await createJwt(owner, projectId, ['read']);
    const res = await app.request('POST', `${tokensPath()}/refresh`, { token: first.refreshToken });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toEqual({ accessToken: expect.any(String), refreshToken: expect.any(String), accessTokenExpiresAt: expect.any(String), refreshTokenExpiresAt: expect.any(String) });
    expect(res.body.accessToken).not.toBe(first.accessToken);
    expect(res.body.refreshToken).not.toBe(first.refreshToken);
    expect(decodeJwtPart(res.body.accessToken, 1)).toMatchObject({ tokenId: first.token.id, scopes: ['read'], type: 'access' });

    expect((await app.request('GET', `/api/projects/${projectId}`, { token: res.body.accessToken })).status).toBe(200);
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: first.accessToken })).status).toBe(200);

    const second = await app.request('POST', `${tokensPath()}/refresh`, { token: res.body.refreshToken });
    expect(second.status).toBe(200);
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: second.body.accessToken })).status).toBe(200);
  });

  it('a reused refresh token revokes the whole family immediately', async () => {
    const first = await createJwt(owner, projectId, ['read']);
    const rotated = await app.request('POST', `${tokensPath()}/refresh`, { token: first.refreshToken });
    expect(rotated.status).toBe(200);

    const reuse = await app.request('POST', `${tokensPath()}/refresh`, { token: first.refreshToken });
    expect(reuse.status).toBe(401);
    expect(reuse.body.message).toMatch(/reuse/i);
    for (const token of [first.accessToken, rotated.body.accessToken]) {
      expect((await app.request('GET', `/api/projects/${projectId}`, { token })).status).toBe(401);
    }
    expect((await app.request('POST', `${tokensPath()}/refresh`, { token: rotated.body.refreshToken })).status).toBe(401);
    expect((await owner.request('GET', tokensPath())).body.tokens.map((t: { id: string }) => t.id)).not.toContain(first.token.id);
    const [audit] = await app.platform.db.sql`
      SELECT actor, metadata FROM audit_logs WHERE resource_id = ${first.token.id} AND action = 'token.revoke'`;
    expect(audit.actor).toBe('system:refresh-token-reuse');
    expect(audit.metadata.reason).toMatch(/reuse/);
  });

  it('refuses refresh with an access token, another project, no header or garbage, without touching the family', async () => {
    const t = await createJwt(owner, projectId, ['read']);
    const other = await createProject(owner);
    const cases: [string, Record<string, string>][] = [
      [tokensPath(), { authorization: `Bearer ${t.accessToken}` }],
      [tokensPath(other), { authorization: `Bearer ${t.refreshToken}` }],
      [tokensPath(), {}],
      [tokensPath(), { authorization: 'Bearer eyJhbGciOiJub25lIn0.e30.' }],
      [tokensPath(), { authorization: 'Basic abc' }],
    ];
    for (const [base, headers] of cases) {
      const res = await app.request('POST', `${base}/refresh`, { headers });
      expect({ headers, status: res.status }).toEqual({ headers, status: 401 });
    }
    expect((await app.request('POST', `${tokensPath()}/refresh`, { token: t.refreshToken })).status).toBe(200);
  });

  it('DELETE revokes every access and refresh token of the family at once', async () => {
    const t = await createJwt(owner, projectId, ['read']);
    const rotated = (await app.request('POST', `${tokensPath()}/refresh`, { token: t.refreshToken })).body;
    expect((await owner.request('DELETE', `${tokensPath()}/${t.token.id}`)).status).toBe(204);
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: t.accessToken })).status).toBe(401);
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: rotated.accessToken })).status).toBe(401);
    expect((await app.request('POST', `${tokensPath()}/refresh`, { token: rotated.refreshToken })).status).toBe(401);
    const rows = await app.platform.db.sql`SELECT kind, revoked_at FROM project_token_jwts WHERE token_id = ${t.token.id}`;
    expect(rows.length).toBe(4);
    expect(rows.every((r) => r.revoked_at !== null)).toBe(true);
  });

  it('keeps revocations when the cache loses them (Redis flush): rebuilt from Postgres before answering', async () => {
    const t = await createJwt(owner, projectId, ['read']);
    const alive = await createJwt(owner, projectId, ['read']);
    expect((await owner.request('DELETE', `${tokensPath()}/${t.token.id}`)).status).toBe(204);
    const jti = decodeJwtPart(t.accessToken, 1).jti as string;
    const cache = app.platform.cache;
    expect(await cache.get(`jwt:revoked:${jti}`)).toBe('1');

    // What a FLUSHALL or a Redis restart without persistence leaves behind.
    await cache.del(`jwt:revoked:${jti}`);
    await cache.del('jwt:revocations-mirrored');
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: t.accessToken })).status).toBe(401);
    expect(await cache.get(`jwt:revoked:${jti}`)).toBe('1');
    expect(await cache.get('jwt:revocations-mirrored')).not.toBeNull();
    expect((await app.request('GET', `/api/projects/${projectId}`, { token: alive.accessToken })).status).toBe(200);
  });

  it('stops working when its project is deleted', async () => {
    const doomed = await createProject(owner);
    const t = await createJwt(owner, doomed, ['read']);
    const o = await createOpaque(owner, doomed, { read: true });
    expect((await owner.request('DELETE', `/api/projects/${doomed}`)).status).toBe(204);
    expect((await app.request('GET', '/api/users/me', { token: o.value })).status).toBe(401);
    const res = await app.request('GET', `/api/projects/${doomed}`, { token: t.accessToken });
    expect([401, 404]).toContain(res.status);
  });
});

describe('JWT revocation list internals', () => {
  it('answers from Postgres when the cache fails, and sweeps records past their expiry', async () => {
    const t = await createJwt(owner, projectId, ['read']);
    expect((await owner.request('DELETE', `${tokensPath()}/${t.token.id}`)).status).toBe(204);
    const revokedJti = decodeJwtPart(t.accessToken, 1).jti as string;
    const live = await createJwt(owner, projectId, ['read']);
    const liveJti = decodeJwtPart(live.accessToken, 1).jti as string;

    const broken = new Proxy(app.platform.cache, {
      get: (target, prop) => (prop === 'get' ? async () => Promise.reject(new Error('cache down')) : Reflect.get(target, prop)),
    });
    const list = new JwtRevocationList({ sql: app.platform.db.sql, cache: broken, logger: createLogger('silent') });
    expect(await list.isRevoked(revokedJti)).toBe(true);
    expect(await list.isRevoked(liveJti)).toBe(false);

    await app.platform.db.sql`UPDATE project_token_jwts SET expires_at = now() - interval '2 hours' WHERE token_id = ${t.token.id}`;
    expect(await list.sweepExpired()).toBeGreaterThanOrEqual(2);
    expect((await app.platform.db.sql`SELECT 1 FROM project_token_jwts WHERE token_id = ${t.token.id}`).length).toBe(0);
    expect((await app.platform.db.sql`SELECT 1 FROM project_token_jwts WHERE token_id = ${live.token.id}`).length).toBe(2);
  });
});
