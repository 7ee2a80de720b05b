import { randomBytes } from 'node:crypto';
import { startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, opaqueToken, personalToken, type Project } from '../webhooks/support';

/**
 * Cohort CRUD, evaluate, validation, limits and who may call what (docs/cohorts.md;
 * docs/api-reference.md#personal-access-tokens), over HTTP.
 */

let app: TestApp;
let p: Project;
let other: Project;

const BETA = {
  name: 'Beta testers',
  description: 'Staff and European pro accounts',
  rules: [
    { id: 'staff', conditions: [{ property: 'email', operator: 'ends_with', value: '@staff.example.com' }] },
    {
      id: 'eu-pro',
      conditions: [
        { property: 'country', operator: 'in', value: ['FR', 'DE'] },
        { property: 'plan', operator: 'equals', value: 'pro' },
      ],
    },
  ],
};

const base = (project: Project) => `/api/projects/${project.projectId}/cohorts`;
const unique = (name: string) => `${name} ${randomBytes(3).toString('hex')}`;

async function createCohort(body: Record<string, unknown> = {}) {
  const res = await p.member.request('POST', base(p), { ...BETA, name: unique('Beta'), ...body });
  expectStatus(res, 201, 'create cohort');
  return res.body;
}

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
});
afterAll(async () => {
  await app?.stop();
});

describe('cohort CRUD', () => {
  it('creates, reads, lists, changes and deletes a cohort, each change audited', async () => {
    const created = await createCohort({ name: 'Beta testers' });
    expect(created).toEqual({
      id: expect.stringMatching(/^coh_/),
      projectId: p.projectId,
      name: 'Beta testers',
      description: BETA.description,
      rules: BETA.rules,
      version: 1,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      createdBy: p.member.email,
      updatedBy: p.member.email,
    });
    expect((await p.viewer.request('GET', `${base(p)}/${created.id}`)).body).toEqual(created);
    const list = await p.viewer.request('GET', base(p));
    expect(list.status).toBe(200);
    expect(list.body.cohorts.map((c: { id: string }) => c.id)).toContain(created.id);

    const changed = await p.admin.request('PATCH', `${base(p)}/${created.id}`, { description: 'Staff only', rules: [BETA.rules[0]], version: 1 });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ description: 'Staff only', rules: [BETA.rules[0]], version: 2, updatedBy: p.admin.email, createdBy: p.member.email });
    // A stale version is a conflict; a patch that changes nothing writes nothing.
    const stale = await p.admin.request('PATCH', `${base(p)}/${created.id}`, { description: 'x', version: 1 });
    expect(stale.status).toBe(409);
    expect(stale.body.currentVersion).toBe(2);
    expect((await p.admin.request('PATCH', `${base(p)}/${created.id}`, { description: 'Staff only' })).body.version).toBe(2);

    expect((await p.member.request('DELETE', `${base(p)}/${created.id}`)).status).toBe(204);
    expect((await p.viewer.request('GET', `${base(p)}/${created.id}`)).status).toBe(404);
    expect((await p.member.request('DELETE', `${base(p)}/${created.id}`)).status).toBe(404);

    const audit = await app.platform.db.sql<{ action: string }[]>`
      SELECT action FROM audit_logs WHERE resource_id = ${created.id} ORDER BY timestamp`;
    expect(audit.map((a) => a.action)).toEqual(['cohort.create', 'cohort.update', 'cohort.delete']);
  });

  it('generates rule ids that are not given', async () => {
    const cohort = await createCohort({ rules: [{ conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }] }, { conditions: [] }] });
    expect(cohort.rules).toEqual([
      { id: expect.stringMatching(/^crule_/), conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }] },
      { id: expect.stringMatching(/^crule_/), conditions: [] },
    ]);
  });

  it('keeps names unique per project whatever their case (409), not across projects', async () => {
    const name = unique('Unique');
    await createCohort({ name });
    expect((await p.member.request('POST', base(p), { name: name.toUpperCase() })).status).toBe(409);
    expect((await other.member.request('POST', base(other), { name })).status).toBe(201);
  });
});

describe('cohort evaluate', () => {
  let cohortId: string;
  beforeAll(async () => {
    cohortId = (await createCohort()).id;
  });
  const evaluate = (body: unknown, user = p.viewer) => user.request('POST', `${base(p)}/${cohortId}/evaluate`, body);

  it('answers membership and the first cohort rule that matched', async () => {
    expect((await evaluate({ userId: 'u1', context: { email: 'ann@staff.example.com', country: 'FR', plan: 'pro' } })).body).toEqual({
      cohortId,
      userId: 'u1',
      member: true,
      matchedRuleId: 'staff',
    });
    expect((await evaluate({ userId: 'u2', context: { country: 'DE', plan: 'pro' } })).body).toEqual({ cohortId, userId: 'u2', member: true, matchedRuleId: 'eu-pro' });
    expect((await evaluate({ userId: 'u3', context: { country: 'DE', plan: 'free' } })).body).toEqual({ cohortId, userId: 'u3', member: false, matchedRuleId: null });
    expect((await evaluate({ userId: 'u4' })).body).toMatchObject({ member: false });
  });

  it('uses userId as the targeting key when the context has none', async () => {
    const keyed = await createCohort({ rules: [{ id: 'vip', conditions: [{ property: 'targetingKey', operator: 'in', value: ['vip-1'] }] }] });
    const url = `${base(p)}/${keyed.id}/evaluate`;
    expect((await p.viewer.request('POST', url, { userId: 'vip-1', context: {} })).body).toMatchObject({ member: true, matchedRuleId: 'vip' });
    expect((await p.viewer.request('POST', url, { userId: 'vip-1', context: { targetingKey: 'someone-else' } })).body).toMatchObject({ member: false });
    expect((await p.viewer.request('POST', url, { userId: 'x', context: { targetingKey: 'vip-1' } })).body).toMatchObject({ userId: 'x', member: true });
  });

  it('lets read-tier personal tokens and read project tokens evaluate, not create', async () => {
    const pat = await personalToken(p.viewer, 'read');
    expect((await app.request('POST', `${base(p)}/${cohortId}/evaluate`, { token: pat, body: { userId: 'u' } })).status).toBe(200);
    const create = await app.request('POST', base(p), { token: pat, body: { name: unique('PAT') } });
    expect(create.status).toBe(403);
    expect(create.body.message).toContain('read-only');
    const read = await opaqueToken(p.owner, p.projectId, { read: true });
    expect((await app.request('POST', `${base(p)}/${cohortId}/evaluate`, { token: read, body: { userId: 'u' } })).status).toBe(200);
    expect((await app.request('GET', base(p), { token: read })).status).toBe(200);
    expect((await app.request('POST', base(p), { token: read, body: { name: unique('Token') } })).status).toBe(403);
  });

  it('refuses malformed and oversized bodies (400, 413)', async () => {
    for (const bad of [{}, { userId: '' }, { userId: 5 }, { userId: 'u', context: 'x' }, { userId: 'u', context: [] }, { userId: 'u', extra: 1 }]) {
      expect((await evaluate(bad)).status).toBe(400);
    }
    const raw = await app.request('POST', `${base(p)}/${cohortId}/evaluate`, { cookie: p.viewer.cookie, csrf: p.viewer.csrf, rawBody: '{"userId":', headers: { 'content-type': 'application/json' } });
    expect(raw.status).toBe(400);
    expect((await evaluate({ userId: 'u', context: { blob: 'x'.repeat(70 * 1024) } })).status).toBe(413);
    expect((await p.viewer.request('POST', `${base(p)}/coh_missing/evaluate`, { userId: 'u' })).status).toBe(404);
  });
});

describe('validation and limits', () => {
  it('validates conditions as flag conditions, without in_cohort, with the field path', async () => {
    const cases: [unknown, string][] = [
      [[{ conditions: [{ property: 'a', operator: 'like', value: 1 }] }], 'rules.0.conditions.0.operator'],
      [[{ conditions: [{ property: 'a', operator: 'gt', value: 'soon' }] }], 'rules.0.conditions.0'],
      [[{ conditions: [{ property: 'a', operator: 'matches', value: '(a+)+$' }] }], 'rules.0.conditions.0'],
      [[{ conditions: [{ property: '', operator: 'exists' }] }], 'rules.0.conditions.0.property'],
      [[{ conditions: [{ property: 'k', operator: 'in_cohort', value: 'coh_x' }] }], 'rules.0.conditions.0.operator'],
      [[{ id: 'a', conditions: [] }, { id: 'a', conditions: [] }], 'rules.1.id'],
      [[{ conditions: [{ property: 'a', operator: 'equals', value: 'x\u0000' }] }], 'rules.0.conditions.0'],
      [[{ conditions: [], value: 1 }], 'rules.0'],
    ];
    for (const [rules, path] of cases) {
      const res = await p.member.request('POST', base(p), { name: unique('Bad'), rules });
      expect({ rules, status: res.status }).toEqual({ rules, status: 400 });
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(`body.${path}`);
    }
    const nested = await p.member.request('POST', base(p), { name: unique('Nested'), rules: [{ conditions: [{ property: 'k', operator: 'in_cohort', value: 'coh_x' }] }] });
    expect(nested.body.message).toContain('cohorts do not nest');
    for (const bad of [{}, { name: '' }, { name: 'x'.repeat(201) }, { name: 'ok', description: 5 }, { name: 'ok', extra: 1 }, { name: 'ok', rules: {} }]) {
      expect((await p.member.request('POST', base(p), bad)).status).toBe(400);
    }
    const cohort = await createCohort();
    expect((await p.member.request('PATCH', `${base(p)}/${cohort.id}`, {})).status).toBe(400);
    expect((await p.member.request('PATCH', `${base(p)}/${cohort.id}`, { version: 1 })).status).toBe(400);
    expect((await p.member.request('PATCH', `${base(p)}/${cohort.id}`, { projectId: other.projectId })).status).toBe(400);
  });

  it('limits rules per cohort, conditions per rule, matches per cohort and body size', async () => {
    const condition = { property: 'plan', operator: 'equals', value: 'pro' };
    const tooManyRules = Array.from({ length: 51 }, () => ({ conditions: [condition] }));
    expect((await p.member.request('POST', base(p), { name: unique('Rules'), rules: tooManyRules })).status).toBe(400);
    expect((await p.member.request('POST', base(p), { name: unique('Rules'), rules: tooManyRules.slice(0, 50) })).status).toBe(201);
    expect((await p.member.request('POST', base(p), { name: unique('Conditions'), rules: [{ conditions: Array(51).fill(condition) }] })).status).toBe(400);
    const pattern = { property: 'ua', operator: 'matches', value: '^Mozilla' };
    const patterns = await p.member.request('POST', base(p), { name: unique('Patterns'), rules: [{ conditions: Array(21).fill(pattern) }] });
    expect(patterns.status).toBe(400);
    expect(patterns.body.message).toContain('at most 20');
    const huge = await p.member.request('POST', base(p), { name: unique('Huge'), rules: [{ conditions: [{ property: 'id', operator: 'in', value: Array.from({ length: 30_000 }, (_, i) => `user-${i}`) }] }] });
    expect(huge.status).toBe(413);
  });

  it('limits cohorts per project to 100 (409 past it)', async () => {
    const project = await createProject(app);
    await Promise.all(Array.from({ length: 100 }, (_, i) => project.owner.request('POST', base(project), { name: `c${i}` }).then((r) => expectStatus(r, 201, `cohort ${i}`))));
    const over = await project.owner.request('POST', base(project), { name: 'one too many' });
    expect(over.status).toBe(409);
    expect(over.body.message).toContain('at most 100');
    expect((await project.viewer.request('GET', base(project))).body.cohorts).toHaveLength(100);
  });
});

describe('who may call', () => {
  let cohortId: string;
  beforeAll(async () => {
    cohortId = (await createCohort()).id;
  });

  it('refuses anonymous callers (401)', async () => {
    expect((await app.request('GET', base(p))).status).toBe(401);
    expect((await app.request('POST', base(p), { body: { name: 'x' } })).status).toBe(401);
    expect((await app.request('GET', `${base(p)}/${cohortId}`)).status).toBe(401);
    expect((await app.request('PATCH', `${base(p)}/${cohortId}`, { body: { name: 'x' } })).status).toBe(401);
    expect((await app.request('DELETE', `${base(p)}/${cohortId}`)).status).toBe(401);
    expect((await app.request('POST', `${base(p)}/${cohortId}/evaluate`, { body: { userId: 'u' } })).status).toBe(401);
  });

  it('hides the project from users of another project (404), and cohorts of another project under their own', async () => {
    const outsider = other.owner;
    expect((await outsider.request('GET', base(p))).status).toBe(404);
    expect((await outsider.request('POST', base(p), { name: 'x' })).status).toBe(404);
    expect((await outsider.request('GET', `${base(p)}/${cohortId}`)).status).toBe(404);
    expect((await outsider.request('PATCH', `${base(p)}/${cohortId}`, { name: 'x' })).status).toBe(404);
    expect((await outsider.request('DELETE', `${base(p)}/${cohortId}`)).status).toBe(404);
    expect((await outsider.request('POST', `${base(p)}/${cohortId}/evaluate`, { userId: 'u' })).status).toBe(404);
    // Their own project's path with this project's cohort id: not found either.
    expect((await outsider.request('GET', `${base(other)}/${cohortId}`)).status).toBe(404);
    expect((await outsider.request('DELETE', `${base(other)}/${cohortId}`)).status).toBe(404);
    expect((await outsider.request('POST', `${base(other)}/${cohortId}/evaluate`, { userId: 'u' })).status).toBe(404);
    const otherPat = await personalToken(outsider, 'read');
    expect((await app.request('POST', `${base(p)}/${cohortId}/evaluate`, { token: otherPat, body: { userId: 'u' } })).status).toBe(404);
  });

  it('lets viewers read and evaluate but not write (403)', async () => {
    expect((await p.viewer.request('GET', `${base(p)}/${cohortId}`)).status).toBe(200);
    expect((await p.viewer.request('POST', base(p), { name: unique('Viewer') })).status).toBe(403);
    expect((await p.viewer.request('PATCH', `${base(p)}/${cohortId}`, { name: 'x' })).status).toBe(403);
    expect((await p.viewer.request('DELETE', `${base(p)}/${cohortId}`)).status).toBe(403);
  });

  it('lets write-tier personal tokens write (as their user) and refuses a project token without write', async () => {
    const pat = await personalToken(p.member, 'write');
    const res = await app.request('PATCH', `${base(p)}/${cohortId}`, { token: pat, body: { description: 'by token' } });
    expect(res.status).toBe(200);
    expect(res.body.updatedBy).toContain(p.member.email);
    const readOnly = await opaqueToken(p.owner, p.projectId, { read: true });
    expect((await app.request('DELETE', `${base(p)}/${cohortId}`, { token: readOnly })).status).toBe(403);
  });
});

describe('OpenAPI', () => {
  it('documents the cohort routes', async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    expect(Object.keys(doc.paths['/api/projects/{id}/cohorts']).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/api/projects/{id}/cohorts/{cohortId}']).sort()).toEqual(['delete', 'get', 'patch']);
    const evaluate = doc.paths['/api/projects/{id}/cohorts/{cohortId}/evaluate'].post;
    expect(JSON.stringify(evaluate.responses)).toContain('matchedRuleId');
  });
});
