import { randomBytes } from 'node:crypto';
import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { createFixture, createFlag, uniqueKey, type DataPlaneFixture } from '../data-plane/support';

// In-process compatibility (docs/flagd.md#compatibility): every flag read answers whether
// flagd's in-process providers evaluate it exactly, and a project with
// requireInProcessCompatible refuses writes that would make a flag untranslatable.

let app: TestApp;
let fx: DataPlaneFixture;
let admin: TestUser;
let member: TestUser;

const qs = (query: Record<string, string>) => `?${new URLSearchParams(query)}`;
const flagPath = (key: string) => `/api/flags/${key}${qs({ serviceId: fx.serviceId, environment: 'development' })}`;
const projectPath = () => `/api/projects/${fx.projectId}`;

const gold = { property: 'plan', operator: 'equals', value: 'gold' };
const corporate = { property: 'email', operator: 'matches', value: '@corp\\.example$' };
const untranslatable = [{ id: 'corp', conditions: [gold, corporate], value: true }];

async function setRequirement(value: boolean) {
  const res = await fx.owner.request('PATCH', projectPath(), { requireInProcessCompatible: value });
  expect(res.status).toBe(200);
  expect(res.body.requireInProcessCompatible).toBe(value);
}

async function createCohort(rules: unknown[]) {
  const res = await fx.owner.request('POST', `${projectPath()}/cohorts`, { name: `cohort-${randomBytes(3).toString('hex')}`, rules });
  expect(res.status).toBe(201);
  return res.body as { id: string; version: number };
}

beforeAll(async () => {
  app = await startTestApp();
  fx = await createFixture(app);
  admin = await app.signup();
  member = await app.signup();
  for (const [user, role] of [
    [admin, 'admin'],
    [member, 'member'],
  ] as const) {
    expect((await fx.owner.request('POST', `${projectPath()}/members`, { userId: user.id, role })).status).toBe(201);
  }
});
afterAll(() => app?.stop());

describe('inProcessCompatible and inProcessIssues on flag reads', () => {
  it('answers them on the single read, the list, a projection and the write routes', async () => {
    const plain = await createFlag(fx.owner, fx.serviceId, { targeting: [{ id: 'gold', conditions: [gold], value: true, rolloutPercentage: 12.5 }] });
    expect(plain).toMatchObject({ inProcessCompatible: true, inProcessIssues: [] });
    const regex = await createFlag(fx.owner, fx.serviceId, { targeting: untranslatable });
    const issues = [{ ruleId: 'corp', operator: 'matches', message: expect.stringContaining('regular-expression') }];
    expect(regex).toMatchObject({ inProcessCompatible: false, inProcessIssues: issues });

    const single = await fx.viewer.request('GET', flagPath(regex.key));
    expect(single.status).toBe(200);
    expect(single.body).toMatchObject({ inProcessCompatible: false, inProcessIssues: issues });

    const list = await fx.viewer.request('GET', `/api/flags${qs({ projectId: fx.projectId, serviceId: fx.serviceId, environment: 'development', limit: '100' })}`);
    expect(list.status).toBe(200);
    const byKey = new Map(list.body.flags.map((flag: { key: string }) => [flag.key, flag]));
    expect(byKey.get(plain.key)).toMatchObject({ inProcessCompatible: true, inProcessIssues: [] });
    expect(byKey.get(regex.key)).toMatchObject({ inProcessCompatible: false, inProcessIssues: issues });

    const projected = await fx.viewer.request('GET', `/api/flags${qs({ projectId: fx.projectId, serviceId: fx.serviceId, fields: 'key,inProcessCompatible', search: regex.key })}`);
    expect(projected.status).toBe(200);
    expect(projected.body.flags).toEqual([{ key: regex.key, inProcessCompatible: false }]);

    const patched = await fx.owner.request('PATCH', flagPath(regex.key), { targeting: [{ id: 'corp', conditions: [gold], value: true }] });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ inProcessCompatible: true, inProcessIssues: [] });
    const toggled = await fx.owner.request('POST', `/api/flags/${regex.key}/toggle${qs({ serviceId: fx.serviceId })}`, {});
    expect(toggled.body).toMatchObject({ enabled: true, inProcessCompatible: true });

    const bulk = await fx.owner.request('POST', '/api/flags/bulk', { flags: [{ key: uniqueKey('inproc'), serviceId: fx.serviceId, environment: 'development', targeting: untranslatable }] });
    expect(bulk.body.results[0]).toMatchObject({ status: 'success', flag: { inProcessCompatible: false, inProcessIssues: issues } });
  });

  it('counts the conditions of the cohorts a flag names, as the cohort is now', async () => {
    const cohort = await createCohort([{ conditions: [gold] }]);
    const flag = await createFlag(fx.owner, fx.serviceId, { targeting: [{ id: 'members', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: cohort.id }], value: true }] });
    expect(flag.inProcessCompatible).toBe(true);
    const changed = await fx.owner.request('PATCH', `${projectPath()}/cohorts/${cohort.id}`, { rules: [{ conditions: [corporate] }] });
    expect(changed.status).toBe(200);
    const read = await fx.viewer.request('GET', flagPath(flag.key));
    expect(read.body).toMatchObject({
      inProcessCompatible: false,
      inProcessIssues: [{ ruleId: 'members', operator: 'in_cohort', message: expect.stringContaining('regular-expression') }],
    });
  });
});

describe('requireInProcessCompatible', () => {
  afterEach(() => setRequirement(false));

  it('defaults to false; admins and owners set it, members, viewers and strangers may not', async () => {
    expect((await fx.viewer.request('GET', projectPath())).body.requireInProcessCompatible).toBe(false);
    expect((await member.request('PATCH', projectPath(), { requireInProcessCompatible: true })).status).toBe(403);
    expect((await fx.viewer.request('PATCH', projectPath(), { requireInProcessCompatible: true })).status).toBe(403);
    expect([403, 404]).toContain((await fx.outsider.request('PATCH', projectPath(), { requireInProcessCompatible: true })).status);
    expect((await app.request('PATCH', projectPath(), { body: { requireInProcessCompatible: true } })).status).toBe(401);
    expect((await fx.owner.request('PATCH', projectPath(), { requireInProcessCompatible: 'yes' })).status).toBe(400);
    expect((await fx.viewer.request('GET', projectPath())).body.requireInProcessCompatible).toBe(false);
    const set = await admin.request('PATCH', projectPath(), { requireInProcessCompatible: true });
    expect(set.status).toBe(200);
    expect(set.body.requireInProcessCompatible).toBe(true);
  });

  it('refuses an untranslatable create, patch, bulk create, bulk update and import with 400 and the path, changing nothing', async () => {
    const existing = await createFlag(fx.owner, fx.serviceId, { targeting: [{ id: 'gold', conditions: [gold], value: true }] });
    await setRequirement(true);
    const path = 'targeting.0.conditions.1.operator';

    const key = uniqueKey('inproc');
    const created = await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, targeting: untranslatable });
    expect(created.status).toBe(400);
    expect(created.body.message).toMatch(/^Validation failed/);
    expect(created.body.details).toEqual([{ path, message: expect.stringContaining('regular-expression') }]);
    expect((await fx.owner.request('GET', flagPath(key))).status).toBe(404);

    const patched = await fx.owner.request('PATCH', flagPath(existing.key), { targeting: untranslatable });
    expect(patched.status).toBe(400);
    expect(patched.body.details).toEqual([{ path, message: expect.any(String) }]);
    const after = await fx.owner.request('GET', flagPath(existing.key));
    expect(after.body).toMatchObject({ version: existing.version, targeting: existing.targeting, inProcessCompatible: true });

    const bulkKey = uniqueKey('inproc');
    const bulk = await fx.owner.request('POST', '/api/flags/bulk', { flags: [{ key: bulkKey, serviceId: fx.serviceId, environment: 'development', targeting: untranslatable }] });
    expect(bulk.body.results[0]).toMatchObject({ status: 'failure', statusCode: 400, details: [{ path, message: expect.any(String) }] });
    expect((await fx.owner.request('GET', flagPath(bulkKey))).status).toBe(404);

    const bulkUpdate = await fx.owner.request('PATCH', '/api/flags/bulk', {
      flags: [{ key: existing.key, serviceId: fx.serviceId, environment: 'development', updates: { targeting: untranslatable } }],
    });
    expect(bulkUpdate.body.results[0]).toMatchObject({ status: 'failure', statusCode: 400, details: [{ path, message: expect.any(String) }] });

    const importKey = uniqueKey('inproc');
    const imported = await fx.owner.request('POST', `/api/flags/import${qs({ projectId: fx.projectId })}`, {
      version: '1.0',
      flags: [{ key: importKey, serviceId: fx.serviceId, environment: 'development', type: 'boolean', targeting: untranslatable }],
    });
    expect(imported.body.results[0]).toMatchObject({ status: 'failed', statusCode: 400, details: [{ path, message: expect.any(String) }] });
    expect((await fx.owner.request('GET', flagPath(importKey))).status).toBe(404);
    expect((await fx.owner.request('GET', flagPath(existing.key))).body.version).toBe(existing.version);

    // Translatable writes still go through.
    const fine = await fx.owner.request('PATCH', flagPath(existing.key), { targeting: [{ id: 'gold', conditions: [gold, { property: 'age', operator: 'gte', value: 18 }], value: true }] });
    expect(fine.status).toBe(200);
    expect(fine.body.inProcessCompatible).toBe(true);
  });

  it('refuses a flag naming an untranslatable cohort, and a cohort change that would make a flag naming it untranslatable', async () => {
    const regexCohort = await createCohort([{ conditions: [corporate] }]);
    const plainCohort = await createCohort([{ conditions: [gold] }]);
    const unused = await createCohort([{ conditions: [gold] }]);
    const flag = await createFlag(fx.owner, fx.serviceId, { targeting: [{ id: 'members', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: plainCohort.id }], value: true }] });
    await setRequirement(true);

    const naming = await fx.owner.request('POST', '/api/flags', {
      key: uniqueKey('inproc'),
      serviceId: fx.serviceId,
      targeting: [{ id: 'r', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: regexCohort.id }], value: true }],
    });
    expect(naming.status).toBe(400);
    expect(naming.body.details).toEqual([{ path: 'targeting.0.conditions.0.operator', message: expect.stringContaining(regexCohort.id) }]);

    const cohortPath = `${projectPath()}/cohorts/${plainCohort.id}`;
    const refused = await fx.owner.request('PATCH', cohortPath, { rules: [{ conditions: [gold, corporate] }] });
    expect(refused.status).toBe(400);
    expect(refused.body.details).toEqual([{ path: 'rules.0.conditions.1.operator', message: expect.stringContaining(flag.key) }]);
    expect((await fx.owner.request('GET', cohortPath)).body.version).toBe(plainCohort.version);
    expect((await fx.viewer.request('GET', flagPath(flag.key))).body.inProcessCompatible).toBe(true);

    // A cohort no flag names may hold anything.
    expect((await fx.owner.request('PATCH', `${projectPath()}/cohorts/${unused.id}`, { rules: [{ conditions: [corporate] }] })).status).toBe(200);
  });

  it('refuses only what a write adds: a flag written before it was set can still be toggled and renamed, not made worse', async () => {
    const before = await createFlag(fx.owner, fx.serviceId, { targeting: untranslatable });
    expect(before.inProcessCompatible).toBe(false);
    await setRequirement(true);
    const read = await fx.viewer.request('GET', flagPath(before.key));
    expect(read.body).toMatchObject({ inProcessCompatible: false, inProcessIssues: [expect.objectContaining({ operator: 'matches' })] });

    const toggled = await fx.owner.request('POST', `/api/flags/${before.key}/toggle${qs({ serviceId: fx.serviceId })}`, {});
    expect(toggled.status).toBe(200);
    expect(toggled.body).toMatchObject({ enabled: true, inProcessCompatible: false });
    expect((await fx.owner.request('PATCH', flagPath(before.key), { name: 'Corporate users' })).status).toBe(200);

    const signup = { property: 'signup', operator: 'before', value: '2024-01-01' };
    const worse = await fx.owner.request('PATCH', flagPath(before.key), { targeting: [{ id: 'corp', conditions: [gold, corporate, signup], value: true }] });
    expect(worse.status).toBe(400);
    expect(worse.body.details).toEqual([{ path: 'targeting.0.conditions.2.operator', message: expect.stringContaining('dates') }]);
  });
});
