import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';
import { appSigningKey, createJwt, createOpaque, createPersonalToken, createProject } from '../tokens/support';
import { CREDENTIAL_CACHE_TTL_MS } from '../../api/features/tokens/wiring';

/**
 * Spec 3 and 8: a revoked personal token stops working at once on the replica that revoked it
 * and within about 10 s on every other replica sharing the cache. Two full platform instances
 * share one Postgres database, one Redis key prefix and the JWT signing key, as production
 * replicas do.
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

const SPEC_PROPAGATION_MS = 10_000;
const me = (app: TestApp, token: string) => app.request('GET', '/api/users/me', { token }).then((r) => r.status);

/** Revokes on `first` and returns how long `second` kept accepting the token. */
async function propagationMs(token: string, revoke: () => Promise<number>): Promise<number> {
  // Both replicas have resolved (and memoised) the token before it is revoked.
  expect(await me(first, token)).toBe(200);
  expect(await me(second, token)).toBe(200);
  const start = Date.now();
  expect([200, 204]).toContain(await revoke());
  expect(await me(first, token)).toBe(401);
  await eventually(async () => (await me(second, token)) === 401, SPEC_PROPAGATION_MS, 50);
  return Date.now() - start;
}

describe('revocation across replicas sharing Redis', () => {
  it('a revoked personal token is refused by the other replica within 10 s (pub/sub eviction, well before the memo expires)', async () => {
    const pat = await createPersonalToken(user, { tier: 'write' });
    const elapsed = await propagationMs(pat.value, async () => (await user.request('DELETE', `/api/users/me/personal-tokens/${pat.token.id}`)).status);
    expect(elapsed).toBeLessThan(SPEC_PROPAGATION_MS);
    expect(elapsed).toBeLessThan(CREDENTIAL_CACHE_TTL_MS);
  });

  it('a rotated personal token is refused by the other replica and the new one works there', async () => {
    const pat = await createPersonalToken(user, { tier: 'read' });
    let fresh = '';
    const elapsed = await propagationMs(pat.value, async () => {
      const res = await user.request('POST', `/api/users/me/personal-tokens/${pat.token.id}/rotate`);
      fresh = res.body.value;
      return res.status;
    });
    expect(elapsed).toBeLessThan(SPEC_PROPAGATION_MS);
    expect(await me(second, fresh)).toBe(200);
  });

  it('revoked opaque and JWT project tokens are refused by the other replica', async () => {
    const projectId = await createProject(user);
    const opaque = await createOpaque(user, projectId, { read: true });
    const jwt = await createJwt(user, projectId, ['read']);
    const revoke = (id: string) => async () => (await user.request('DELETE', `/api/projects/${projectId}/tokens/${id}`)).status;
    expect(await propagationMs(opaque.value, revoke(opaque.token.id))).toBeLessThan(CREDENTIAL_CACHE_TTL_MS);
    expect(await propagationMs(jwt.accessToken, revoke(jwt.token.id))).toBeLessThan(CREDENTIAL_CACHE_TTL_MS);
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
