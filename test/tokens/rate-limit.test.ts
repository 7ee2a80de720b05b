import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { createJwt, createOpaque, createPersonalToken, createProject } from './support';

/**
 * A per-token budget (5,000 a minute in production; 3 here) shared by every replica
 * (docs/limits.md).
 */
let app: TestApp;
let owner: TestUser;
let projectId: string;
const LIMIT = 3;

beforeAll(async () => {
  app = await startTestApp({ RATE_LIMIT_PER_TOKEN: String(LIMIT) });
  owner = await app.signup({ verified: true });
  projectId = await createProject(owner);
});
afterAll(() => app?.stop());

async function spend(token: string, n: number) {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) statuses.push((await app.request('GET', `/api/projects/${projectId}`, { token })).status);
  return statuses;
}

describe('per-token rate limit', () => {
  it('answers 429 past the budget of one opaque token, with rate headers, while another token is unaffected', async () => {
    const a = await createOpaque(owner, projectId, { read: true });
    const b = await createOpaque(owner, projectId, { read: true });
    const first = await app.request('GET', `/api/projects/${projectId}`, { token: a.value });
    expect(first.status).toBe(200);
    expect(first.headers.get('ratelimit-limit')).toBe(String(LIMIT));
    expect(first.headers.get('ratelimit-remaining')).toBe(String(LIMIT - 1));
    expect(Number(first.headers.get('ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
    expect(await spend(a.value, LIMIT)).toEqual([200, 200, 429]);
    const limited = await app.request('GET', `/api/projects/${projectId}`, { token: a.value });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ error: 'Too Many Requests', message: expect.stringContaining('API token') });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await spend(b.value, 1)).toEqual([200]);
  });

  it('counts a JWT family as one token, so refreshing does not reset the budget', async () => {
    const t = await createJwt(owner, projectId, ['read']);
    expect(await spend(t.accessToken, LIMIT)).toEqual([200, 200, 200]);
    const refreshed = await app.request('POST', `/api/projects/${projectId}/tokens/refresh`, { token: t.refreshToken });
    expect(refreshed.status).toBe(200);
    expect(await spend(refreshed.body.accessToken, 1)).toEqual([429]);
  });

  it('limits personal tokens per token, and sessions are not subject to it', async () => {
    const pat = await createPersonalToken(owner, { tier: 'read' });
    expect(await spend(pat.value, LIMIT + 1)).toEqual([200, 200, 200, 429]);
    for (let i = 0; i < LIMIT + 1; i++) expect((await owner.request('GET', `/api/projects/${projectId}`)).status).toBe(200);
  });
});
