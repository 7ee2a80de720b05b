import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';
import { appSigningKey, createJwt, createOpaque, createPersonalToken, createProject } from '../tokens/support';

/**
 * Revocation (docs/api-reference.md#personal-access-tokens): a revoked personal token stops working
 * at once on the replica that revoked it and within about 10 s on every other replica sharing the
 * cache. Two full platform instances share one Postgres database, one Redis key prefix and the JWT
 * signing key, as production replicas do. The order is asserted here (refused at once where
 * revoked, then on the other replica) with a generous bound for a loaded machine; that the other
 * replica forgets through pub/sub rather than by waiting out its memo is
 * test/auth/credential-cache.test.ts.
 */
let first: TestApp;
let second: TestApp;
let user: TestUser;

beforeAll(async () => {
  first = await startTestApp();
  second = await startTestApp({
    DATABASE_URL: first.databaseUrl,
    REDIS_KEY_PREFIX: first.platform.config.REDIS_KEY_PREFIX,
    JWT_PRIVATE_KEY: appSigningKey(first).pem,
  });
  user = await first.signup({ verified: true });
});
afterAll(async () => {
  await second?.stop();
  await first?.stop();
});

const PROPAGATION_BOUND_MS = 30_000;
const me = (app: TestApp, token: string) => app.request('GET', '/api/users/me', { token }).then((r) => r.status);

/** Revokes on `first`: refused there at once, then on `second`. */
async function refusedEverywhere(token: string, revoke: () => Promise<number>): Promise<void> {
  // Both replicas have resolved (and memoised) the token before it is revoked.
  expect(await me(first, token)).toBe(200);
  expect(await me(second, token)).toBe(200);
  expect([200, 204]).toContain(await revoke());
  expect(await me(first, token)).toBe(401);
  await eventually(async () => (await me(second, token)) === 401, PROPAGATION_BOUND_MS, 50);
}

describe('revocation across replicas sharing Redis', () => {
  it('a revoked personal token is refused at once where revoked, then by the other replica', async () => {
    const pat = await createPersonalToken(user, { tier: 'write' });
    await refusedEverywhere(pat.value, async () => (await user.request('DELETE', `/api/users/me/personal-tokens/${pat.token.id}`)).status);
  });

  it('a rotated personal token is refused by the other replica and the new one works there', async () => {
    const pat = await createPersonalToken(user, { tier: 'read' });
    let fresh = '';
    await refusedEverywhere(pat.value, async () => {
      const res = await user.request('POST', `/api/users/me/personal-tokens/${pat.token.id}/rotate`);
      fresh = res.body.value;
      return res.status;
    });
    expect(await me(second, fresh)).toBe(200);
  });

  it('revoked opaque and JWT project tokens are refused by the other replica', async () => {
    const projectId = await createProject(user);
    const opaque = await createOpaque(user, projectId, { read: true });
    const jwt = await createJwt(user, projectId, ['read']);
    const revoke = (id: string) => async () => (await user.request('DELETE', `/api/projects/${projectId}/tokens/${id}`)).status;
    await refusedEverywhere(opaque.value, revoke(opaque.token.id));
    await refusedEverywhere(jwt.accessToken, revoke(jwt.token.id));
    // The refresh token is single-use state in Postgres: refused everywhere at once.
    expect((await second.request('POST', `/api/projects/${projectId}/tokens/refresh`, { token: jwt.refreshToken })).status).toBe(401);
  });

  it('refresh reuse detected on one replica revokes the family on the other', async () => {
    const projectId = await createProject(user);
    const jwt = await createJwt(user, projectId, ['read']);
    const rotated = await first.request('POST', `/api/projects/${projectId}/tokens/refresh`, { token: jwt.refreshToken });
    expect(rotated.status).toBe(200);
    expect(await me(second, rotated.body.accessToken)).toBe(200);
    expect((await second.request('POST', `/api/projects/${projectId}/tokens/refresh`, { token: jwt.refreshToken })).status).toBe(401);
    expect(await me(first, rotated.body.accessToken)).toBe(401);
    expect(await me(second, rotated.body.accessToken)).toBe(401);
  });
});
