import { startTestApp, type TestApp } from '../support/harness';
import { addMember, auditEntries, createProject, createService, projectWithRoles, testCredentials } from '../projects/support';

let app: TestApp;
let creds: ReturnType<typeof testCredentials>;
beforeAll(async () => {
  app = await startTestApp();
  creds = testCredentials(app);
});
afterAll(() => app?.stop());

describe('POST /api/services', () => {
  it('creates a service with a derived slug, records every input field and audits it', async () => {
    const { project, member } = await projectWithRoles(app);
    const res = await member.request('POST', '/api/services', { projectId: project.id, name: 'Checkout API', description: 'd', tags: ['t'] });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^svc_/),
      projectId: project.id,
      name: 'Checkout API',
      slug: 'checkout-api',
      description: 'd',
      tags: ['t'],
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    const [entry] = await auditEntries(app, project.id, 'service.create');
    expect(entry).toMatchObject({ resource_id: res.body.id, user_id: member.id, after: expect.objectContaining({ slug: 'checkout-api' }) });
  });

  it('refuses a slug already used in the project (409) but allows it in another project', async () => {
    const owner = await app.signup();
    const a = await createProject(owner);
    const b = await createProject(owner);
    await createService(owner, a.id, { name: 'Web' });
    const dup = await owner.request('POST', '/api/services', { projectId: a.id, name: 'Other', slug: 'web' });
    expect(dup.status).toBe(409);
    expect(dup.body.message).toMatch(/'web'/);
    expect((await owner.request('POST', '/api/services', { projectId: a.id, name: 'Web' })).status).toBe(409);
    expect((await owner.request('POST', '/api/services', { projectId: b.id, name: 'Web' })).status).toBe(201);
  });

  it('validates the body and refuses viewers, strangers and tokens without write', async () => {
    const { project, viewer, owner } = await projectWithRoles(app);
    for (const body of [{ name: 'x' }, { projectId: project.id }, { projectId: project.id, name: 'x', extra: 1 }, { projectId: project.id, name: 'x', slug: '-bad-' }]) {
      expect((await owner.request('POST', '/api/services', body)).status).toBe(400);
    }
    const byViewer = await viewer.request('POST', '/api/services', { projectId: project.id, name: 'x' });
    expect(byViewer.status).toBe(403);
    expect(byViewer.body.message).toBe("Forbidden: You need 'write' permission");
    const stranger = await app.signup();
    expect((await stranger.request('POST', '/api/services', { projectId: project.id, name: 'x' })).status).toBe(404);
    const readToken = await creds.project(project.id, ['read'], owner);
    expect((await app.request('POST', '/api/services', { token: readToken, body: { projectId: project.id, name: 'x' } })).status).toBe(403);
    const readPat = await creds.personal(owner, 'read');
    const readOnly = await app.request('POST', '/api/services', { token: readPat, body: { projectId: project.id, name: 'x' } });
    expect(readOnly.status).toBe(403);
    expect(readOnly.body.message).toBe('Forbidden: personal access token is read-only');
    const writePat = await creds.personal(owner, 'write');
    expect((await app.request('POST', '/api/services', { token: writePat, body: { projectId: project.id, name: 'By PAT' } })).status).toBe(201);
    const noCsrf = await app.request('POST', '/api/services', { cookie: owner.cookie, body: { projectId: project.id, name: 'x' } });
    expect(noCsrf.status).toBe(403);
    const list = await owner.request('GET', `/api/services?projectId=${project.id}`);
    expect(list.body.services.map((s: { name: string }) => s.name)).toEqual(['By PAT']);
  });
});

describe('GET /api/services', () => {
  it('lists, searches and pages services of one project or of all readable projects', async () => {
    const owner = await app.signup();
    const a = await createProject(owner);
    const b = await createProject(owner);
    for (const name of ['Alpha', 'Beta', 'Gamma 100%']) await createService(owner, a.id, { name });
    await createService(owner, b.id, { name: 'Alpha B' });
    const one = await owner.request('GET', `/api/services?projectId=${a.id}`);
    expect(one.body).toMatchObject({ total: 3, limit: 50, offset: 0 });
    expect(one.body.services.map((s: { name: string }) => s.name)).toEqual(['Alpha', 'Beta', 'Gamma 100%']);
    const all = await owner.request('GET', '/api/services?search=alpha');
    expect(all.body.services.map((s: { name: string }) => s.name)).toEqual(['Alpha', 'Alpha B']);
    const percent = await owner.request('GET', `/api/services?projectId=${a.id}&search=${encodeURIComponent('0%')}`);
    expect(percent.body.services.map((s: { name: string }) => s.name)).toEqual(['Gamma 100%']);
    const noWildcard = await owner.request('GET', `/api/services?projectId=${a.id}&search=${encodeURIComponent('%')}`);
    expect(noWildcard.body.total).toBe(1);
    const page = await owner.request('GET', `/api/services?projectId=${a.id}&limit=2&offset=2`);
    expect(page.body).toMatchObject({ total: 3, limit: 2, offset: 2 });
    expect(page.body.services).toHaveLength(1);
    const beyond = await owner.request('GET', `/api/services?projectId=${a.id}&limit=2&offset=10`);
    expect(beyond.body).toMatchObject({ total: 3, services: [] });
    expect((await owner.request('GET', `/api/services?projectId=${a.id}&limit=1000`)).body.limit).toBe(100);
    for (const q of ['limit=0', 'limit=abc', 'offset=-1']) expect((await owner.request('GET', `/api/services?${q}`)).status).toBe(400);
  });

  it('never shows another project services (BOLA)', async () => {
    const a = await app.signup();
    const b = await app.signup();
    const projectB = await createProject(b);
    await createService(b, projectB.id);
    expect((await a.request('GET', `/api/services?projectId=${projectB.id}`)).status).toBe(404);
    expect((await a.request('GET', '/api/services')).body).toMatchObject({ services: [], total: 0 });
    const tokenA = await creds.project((await createProject(a)).id, ['read'], a);
    expect((await app.request('GET', `/api/services?projectId=${projectB.id}`, { token: tokenA })).status).toBe(404);
    expect((await app.request('GET', '/api/services', { token: tokenA })).body.total).toBe(0);
  });
});

describe('GET /api/services/{id} and /by-slug/{slug}', () => {
  it('reads by id and by slug; ambiguous slugs need projectId', async () => {
    const { project, viewer, owner } = await projectWithRoles(app);
    const service = await createService(owner, project.id, { name: 'Payments' });
    const byId = await viewer.request('GET', `/api/services/${service.id}`);
    expect(byId.status).toBe(200);
    expect(byId.body).toEqual(service);
    expect((await viewer.request('GET', '/api/services/by-slug/payments')).body).toEqual(service);
    const second = await createProject(viewer);
    const twin = await createService(viewer, second.id, { name: 'Payments' });
    const ambiguous = await viewer.request('GET', '/api/services/by-slug/payments');
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.message).toMatch(/projectId/);
    expect((await viewer.request('GET', `/api/services/by-slug/payments?projectId=${second.id}`)).body.id).toBe(twin.id);
    expect((await viewer.request('GET', '/api/services/by-slug/nothing-here')).status).toBe(404);
    expect((await viewer.request('GET', '/api/services/svc_missing')).status).toBe(404);
  });

  it('answers 404 for services of other projects, by id, slug and projectId (BOLA)', async () => {
    const owner = await app.signup();
    const stranger = await app.signup();
    const project = await createProject(owner);
    const service = await createService(owner, project.id, { name: 'Secret Svc' });
    const byId = await stranger.request('GET', `/api/services/${service.id}`);
    expect(byId.status).toBe(404);
    expect(byId.body).toEqual({ error: 'Not Found', message: 'Service not found' });
    expect((await stranger.request('GET', '/api/services/by-slug/secret-svc')).status).toBe(404);
    expect((await stranger.request('GET', `/api/services/by-slug/secret-svc?projectId=${project.id}`)).status).toBe(404);
    const token = await creds.project(project.id, ['read'], owner);
    expect((await app.request('GET', `/api/services/${service.id}`, { token })).status).toBe(200);
    const otherToken = await creds.project((await createProject(owner)).id, ['read'], owner);
    expect((await app.request('GET', `/api/services/${service.id}`, { token: otherToken })).status).toBe(404);
  });
});

describe('PATCH and DELETE /api/services/{id}', () => {
  it('updates with an audit diff; refuses slug clashes, empty patches and viewers', async () => {
    const { project, owner, member, viewer } = await projectWithRoles(app);
    const service = await createService(owner, project.id, { name: 'One' });
    await createService(owner, project.id, { name: 'Two' });
    const res = await member.request('PATCH', `/api/services/${service.id}`, { name: 'Uno', description: 'first' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: service.id, name: 'Uno', slug: 'one', description: 'first' });
    const [entry] = await auditEntries(app, project.id, 'service.update');
    expect(entry.before).toMatchObject({ name: 'One' });
    expect(entry.after).toMatchObject({ name: 'Uno' });
    const [row] = await app.platform.db.sql`SELECT changes FROM audit_logs WHERE project_id = ${project.id} AND action = 'service.update'`;
    expect(row.changes).toEqual(
      expect.arrayContaining([
        { field: 'name', oldValue: 'One', newValue: 'Uno' },
        { field: 'description', oldValue: '', newValue: 'first' },
      ]),
    );
    expect((await member.request('PATCH', `/api/services/${service.id}`, { slug: 'two' })).status).toBe(409);
    expect((await member.request('PATCH', `/api/services/${service.id}`, {})).status).toBe(400);
    expect((await member.request('PATCH', `/api/services/${service.id}`, { projectId: 'x' })).status).toBe(400);
    expect((await viewer.request('PATCH', `/api/services/${service.id}`, { name: 'x' })).status).toBe(403);
    expect((await owner.request('PATCH', '/api/services/svc_missing', { name: 'x' })).status).toBe(404);
    const stranger = await app.signup();
    expect((await stranger.request('PATCH', `/api/services/${service.id}`, { name: 'x' })).status).toBe(404);
  });

  it('deletes with services:delete only (owner/admin), cascading flags and auditing', async () => {
    const { project, owner, admin, member, viewer } = await projectWithRoles(app);
    const service = await createService(owner, project.id);
    await app.platform.db.sql`
      INSERT INTO flags (id, project_id, service_id, environment, key, name, type, default_value)
      VALUES ('flg_svc_cascade', ${project.id}, ${service.id}, 'staging', 'k', 'k', 'boolean', 'true')`;
    for (const user of [member, viewer]) {
      const res = await user.request('DELETE', `/api/services/${service.id}`);
      expect(res.status).toBe(403);
      expect(res.body.message).toBe("Forbidden: You need 'delete' permission");
    }
    const stranger = await app.signup();
    expect((await stranger.request('DELETE', `/api/services/${service.id}`)).status).toBe(404);
    const writeToken = await creds.project(project.id, ['read', 'write'], owner);
    expect((await app.request('DELETE', `/api/services/${service.id}`, { token: writeToken })).status).toBe(403);
    expect((await admin.request('DELETE', `/api/services/${service.id}`)).status).toBe(204);
    expect(await app.platform.db.sql`SELECT 1 FROM flags WHERE id = 'flg_svc_cascade'`).toHaveLength(0);
    const [entry] = await auditEntries(app, project.id, 'service.delete');
    expect(entry).toMatchObject({ resource_id: service.id, user_id: admin.id, before: expect.objectContaining({ id: service.id }) });
    expect((await admin.request('DELETE', `/api/services/${service.id}`)).status).toBe(404);
    // Project-token scopes cover flags (docs/api-reference.md#roles-and-capabilities); services
    // stay with users.
    const other = await createService(owner, project.id);
    const deleteToken = await creds.project(project.id, ['read', 'write', 'delete'], owner);
    expect((await app.request('DELETE', `/api/services/${other.id}`, { token: deleteToken })).status).toBe(403);
    expect((await owner.request('GET', `/api/services/${other.id}`)).status).toBe(200);
  });

  it('a user of project A cannot change project B services even when member elsewhere', async () => {
    const a = await app.signup();
    const b = await app.signup();
    const projectA = await createProject(a);
    const projectB = await createProject(b);
    await addMember(b, projectB.id, a, 'viewer');
    const serviceB = await createService(b, projectB.id);
    expect((await a.request('PATCH', `/api/services/${serviceB.id}`, { name: 'x' })).status).toBe(403);
    const tokenA = await creds.project(projectA.id, ['read', 'write', 'delete'], a);
    expect((await app.request('PATCH', `/api/services/${serviceB.id}`, { token: tokenA, body: { name: 'x' } })).status).toBe(404);
    expect((await app.request('DELETE', `/api/services/${serviceB.id}`, { token: tokenA })).status).toBe(404);
    expect((await b.request('GET', `/api/services/${serviceB.id}`)).body.name).toBe(serviceB.name);
  });
});
