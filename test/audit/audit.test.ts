import { startTestApp, type TestApp } from '../support/harness';
import { createProject, createService, projectWithRoles, testCredentials } from '../projects/support';

let app: TestApp;
let creds: ReturnType<typeof testCredentials>;
beforeAll(async () => {
  app = await startTestApp();
  creds = testCredentials(app);
});
afterAll(() => app?.stop());

/** Audit rows at fixed times, for date filters and paging. */
async function seed(projectId: string, rows: { action: string; resourceId: string; userId?: string | null; at: string }[]) {
  for (const [i, r] of rows.entries()) {
    await app.platform.db.sql`
      INSERT INTO audit_logs (id, project_id, user_id, actor, action, resource_type, resource_id, resource_name, timestamp)
      VALUES (${`aud_seed_${projectId}_${i}`}, ${projectId}, ${r.userId ?? null}, 'seed', ${r.action}, ${r.action.split('.')[0]},
              ${r.resourceId}, ${r.resourceId}, ${r.at})`;
  }
}

describe('GET /api/audit', () => {
  it('returns audit entries, newest first, with changes, request IP and user agent', async () => {
    const owner = await app.signup();
    const project = await createProject(owner);
    const service = await createService(owner, project.id, { name: 'Audit Me' });
    await owner.request('PATCH', `/api/services/${service.id}`, { name: 'Audited' }, { headers: { 'user-agent': 'audit-test/1.0' } });
    const res = await owner.request('GET', `/api/audit?projectId=${project.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total: 3, limit: 50, offset: 0 });
    expect(res.body.logs.map((l: { action: string }) => l.action)).toEqual(['service.update', 'service.create', 'project.create']);
    expect(res.body.logs[0]).toEqual({
      id: expect.stringMatching(/^aud_/),
      projectId: project.id,
      userId: owner.id,
      actor: owner.email,
      actorDisplay: { kind: 'user', id: owner.id, name: expect.any(String), email: owner.email },
      action: 'service.update',
      resourceType: 'service',
      resourceId: service.id,
      resourceName: 'Audited',
      before: expect.objectContaining({ name: 'Audit Me' }),
      after: expect.objectContaining({ name: 'Audited' }),
      changes: [{ field: 'name', oldValue: 'Audit Me', newValue: 'Audited' }],
      metadata: {},
      timestamp: expect.any(String),
      ipAddress: expect.stringMatching(/127\.0\.0\.1/),
      userAgent: 'audit-test/1.0',
    });
  });

  it('filters by action, resourceType, resourceId, userId and dates, and pages with total', async () => {
    const owner = await app.signup();
    const project = await createProject(owner);
    await app.platform.db.sql`DELETE FROM audit_logs WHERE project_id = ${project.id}`;
    await seed(project.id, [
      { action: 'service.create', resourceId: 's1', userId: owner.id, at: '2024-03-01T10:00:00Z' },
      { action: 'service.update', resourceId: 's1', userId: owner.id, at: '2024-03-02T23:59:59Z' },
      { action: 'flag.toggle', resourceId: 'f1', userId: null, at: '2024-03-03T00:00:00Z' },
      { action: 'flag.toggle', resourceId: 'f2', userId: 'usr_other', at: '2024-03-04T12:00:00Z' },
    ]);
    const q = async (query: string) => (await owner.request('GET', `/api/audit?projectId=${project.id}&${query}`)).body;
    const ids = (body: { logs: { resourceId: string; action: string }[] }) => body.logs.map((l) => `${l.action}:${l.resourceId}`);
    expect(ids(await q('action=flag.toggle'))).toEqual(['flag.toggle:f2', 'flag.toggle:f1']);
    expect(ids(await q('resourceType=service'))).toEqual(['service.update:s1', 'service.create:s1']);
    expect(ids(await q('resourceId=f1'))).toEqual(['flag.toggle:f1']);
    expect(ids(await q(`userId=${owner.id}`))).toEqual(['service.update:s1', 'service.create:s1']);
    // A date-only endDate covers that whole day; startDate is inclusive.
    expect(ids(await q('startDate=2024-03-02&endDate=2024-03-03'))).toEqual(['flag.toggle:f1', 'service.update:s1']);
    expect(ids(await q('startDate=2024-03-03T00:00:00Z'))).toEqual(['flag.toggle:f2', 'flag.toggle:f1']);
    expect(ids(await q('endDate=2024-03-02T23:59:58Z'))).toEqual(['service.create:s1']);
    expect(ids(await q('endDate=2024-03-02T23:59:59'))).toEqual(['service.update:s1', 'service.create:s1']);
    const page = await q('limit=2&offset=1');
    expect(page).toMatchObject({ total: 4, limit: 2, offset: 1 });
    expect(ids(page)).toEqual(['flag.toggle:f1', 'service.update:s1']);
    expect(await q('limit=500')).toMatchObject({ limit: 100, total: 4 });
    expect(await q('action=flag.toggle&limit=1')).toMatchObject({ total: 2, logs: [expect.objectContaining({ resourceId: 'f2' })] });
  });

  it('validates the query', async () => {
    const owner = await app.signup();
    const project = await createProject(owner);
    const bad = ['', 'startDate=yesterday', 'endDate=2024-02-30T25:00:00Z', 'limit=0', 'limit=x', 'offset=-3', 'startDate=2024-03-05&endDate=2024-03-01'];
    for (const query of bad) {
      const res = await owner.request('GET', `/api/audit?${query ? `projectId=${project.id}&${query}` : ''}`);
      expect([query, res.status]).toEqual([query, 400]);
      expect(res.body).toMatchObject({ error: 'Bad Request', message: expect.any(String) });
    }
    expect((await app.request('GET', `/api/audit?projectId=${project.id}`)).status).toBe(401);
  });

  it('is readable by every role and manage_members tokens; never across projects (BOLA)', async () => {
    const { project, owner, admin, member, viewer } = await projectWithRoles(app);
    for (const user of [owner, admin, member, viewer]) expect((await user.request('GET', `/api/audit?projectId=${project.id}`)).status).toBe(200);
    const readToken = await creds.project(project.id, ['read', 'write'], owner);
    const refused = await app.request('GET', `/api/audit?projectId=${project.id}`, { token: readToken });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe("Forbidden: You need 'manage_members' permission");
    const membersToken = await creds.project(project.id, ['manage_members'], owner);
    expect((await app.request('GET', `/api/audit?projectId=${project.id}`, { token: membersToken })).status).toBe(200);
    const readPat = await creds.personal(viewer, 'read');
    expect((await app.request('GET', `/api/audit?projectId=${project.id}`, { token: readPat })).status).toBe(200);

    const stranger = await app.signup();
    const strangerProject = await createProject(stranger);
    const res = await stranger.request('GET', `/api/audit?projectId=${project.id}`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'Not Found', message: 'Project not found' });
    const foreignToken = await creds.project(strangerProject.id, ['read', 'manage_members'], stranger);
    expect((await app.request('GET', `/api/audit?projectId=${project.id}`, { token: foreignToken })).status).toBe(404);
    // Filters never widen the scope: another project's resource id yields nothing.
    const own = await stranger.request('GET', `/api/audit?projectId=${strangerProject.id}&resourceId=${project.id}`);
    expect(own.body).toMatchObject({ total: 0, logs: [] });
  });

  it('keeps a deleted project trail readable by its org owners and admins only', async () => {
    const orgOwner = await app.signup();
    const orgAdmin = await app.signup();
    const orgMember = await app.signup();
    const org = (await orgOwner.request('POST', '/api/orgs', { name: 'Keepers' })).body;
    await app.platform.db.sql`
      INSERT INTO org_members (org_id, user_id, role) VALUES (${org.id}, ${orgAdmin.id}, 'admin'), (${org.id}, ${orgMember.id}, 'member')`;
    const project = await createProject(orgOwner, { orgId: org.id });
    expect((await orgOwner.request('DELETE', `/api/projects/${project.id}`)).status).toBe(204);
    const byAdmin = await orgAdmin.request('GET', `/api/audit?projectId=${project.id}`);
    expect(byAdmin.status).toBe(200);
    expect(byAdmin.body.logs.map((l: { action: string }) => l.action)).toEqual(['project.delete', 'project.create']);
    expect(byAdmin.body.logs[0].metadata).toEqual({ orgId: org.id, slug: project.slug });
    expect((await orgMember.request('GET', `/api/audit?projectId=${project.id}`)).status).toBe(404);
    expect((await (await app.signup()).request('GET', `/api/audit?projectId=${project.id}`)).status).toBe(404);
  });
});
