import { randomBytes } from 'node:crypto';
import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { createProject, expectStatus, opaqueToken, personalToken, qs, type Project } from '../webhooks/support';

/** GET /api/search/flags (docs/api-reference.md#global-flag-search): what each caller may find. */

let app: TestApp;
let mine: Project;
let other: Project;
/** Unique to this run, so other tests' flags in the shared database never match. */
const tag = randomBytes(4).toString('hex');

beforeAll(async () => {
  app = await startTestApp();
  mine = await createProject(app);
  other = await createProject(app);
  // No environment: the flag is created in all three.
  for (const key of [`${tag}-checkout`, `pay-${tag}-checkout`, `${tag}_under`]) await flagEverywhere(mine.owner, mine.serviceId, key);
  // Keys cannot hold %, names can.
  await flagEverywhere(mine.owner, mine.serviceId, `${tag}-percent`, `Half %off ${tag}`);
  await flagEverywhere(mine.owner, mine.serviceId, `${tag}-letter`, `Half xoff ${tag}`);
  await flagEverywhere(other.owner, other.serviceId, `${tag}-checkout-foreign`);
});
afterAll(async () => {
  await app?.stop();
});

async function flagEverywhere(user: TestUser, serviceId: string, key: string, name = `Name of ${key}`) {
  expectStatus(await user.request('POST', '/api/flags', { key, name, type: 'boolean', serviceId, defaultValue: false }), 201, `create ${key}`);
}

const search = (q: string, extra: Record<string, string | number> = {}) => `/api/search/flags${qs({ q, ...extra })}`;
const keysOf = (body: { results: { key: string }[] }) => body.results.map((r) => r.key);

describe('global flag search', () => {
  it("finds a user's flags grouped per service and key with every environment's state, exact and prefix matches first", async () => {
    const ref = qs({ serviceId: mine.serviceId, environment: 'production' });
    expectStatus(await mine.owner.request('POST', `/api/flags/${tag}-checkout/toggle${ref}`), 200, 'toggle production');
    const res = await mine.viewer.request('GET', search(`${tag}-CHECKOUT`));
    expectStatus(res, 200, 'search');
    expect(keysOf(res.body)).toEqual([`${tag}-checkout`, `pay-${tag}-checkout`]);
    const [first] = res.body.results;
    expect(first).toMatchObject({ projectId: mine.projectId, serviceId: mine.serviceId, serviceName: 'checkout', name: `Name of ${tag}-checkout` });
    expect(typeof first.projectName).toBe('string');
    expect(first.environments).toEqual([
      { environment: 'development', enabled: false, version: 1 },
      { environment: 'staging', enabled: false, version: 1 },
      { environment: 'production', enabled: true, version: 2 },
    ]);
  });

  it("never shows another project's flags, to a user or to a project token", async () => {
    expect(keysOf((await mine.owner.request('GET', search(tag))).body)).not.toContain(`${tag}-checkout-foreign`);
    expect(keysOf((await other.owner.request('GET', search(tag))).body)).toEqual([`${tag}-checkout-foreign`]);
    const outsider = await app.signup({ verified: true });
    expect((await outsider.request('GET', search(tag))).body).toEqual({ results: [] });

    const token = await opaqueToken(other.owner, other.projectId, { read: true });
    const byToken = await app.request('GET', search(tag), { token });
    expectStatus(byToken, 200, 'search with a project token');
    expect(keysOf(byToken.body)).toEqual([`${tag}-checkout-foreign`]);
  });

  it("gives a personal token its user's projects only", async () => {
    const token = await personalToken(mine.member, 'read');
    const res = await app.request('GET', search(tag), { token });
    expectStatus(res, 200, 'search with a personal token');
    expect(keysOf(res.body).sort()).toEqual([`${tag}-checkout`, `${tag}-letter`, `${tag}-percent`, `${tag}_under`, `pay-${tag}-checkout`].sort());
  });

  it('matches % and _ literally', async () => {
    // As wildcards, `_` would match the "-" of every other key and `%off` the "xoff" name too.
    expect(keysOf((await mine.owner.request('GET', search(`${tag}_`))).body)).toEqual([`${tag}_under`]);
    expect(keysOf((await mine.owner.request('GET', search(`%off ${tag}`))).body)).toEqual([`${tag}-percent`]);
  });

  it('honours limit and refuses a bad q or limit with 400 in the error envelope', async () => {
    expect((await mine.owner.request('GET', search(tag, { limit: 1 }))).body.results).toHaveLength(1);
    for (const path of [search(''), search('   '), search('x'.repeat(101)), '/api/search/flags', search(tag, { limit: 51 }), search(tag, { limit: 0 }), search(tag, { limit: 'many' })]) {
      const res = await mine.owner.request('GET', path);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: expect.any(String), message: expect.any(String), details: expect.any(Array) });
    }
    expect((await mine.owner.request('GET', search('x'.repeat(100)))).status).toBe(200);
  });

  it('refuses anonymous callers', async () => {
    expect((await app.request('GET', search(tag))).status).toBe(401);
  });
});
