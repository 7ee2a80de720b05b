import { startTestApp, type TestApp } from '../support/harness';
import { addMember, auditEntries, createProject, createService, projectWithRoles, testCredentials } from './support';

let app: TestApp;
let creds: ReturnType<typeof testCredentials>;
beforeAll(async () => {
  app = await startTestApp();
  creds = testCredentials(app);
});
afterAll(() => app?.stop());

describe('POST /api/projects', () => {
  it('creates a project in the personal org with a derived slug; the creator is owner', async () => {
    const user = await app.signup();
    const res = await user.request('POST', '/api/projects', { name: 'Checkout Ünïcode Team!', description: 'Payments', tags: ['a', 'b', 'a'] });
    expect(res.status).toBe(201);
    const orgs = (await user.request('GET', '/api/orgs')).body.orgs;
    expect(res.body).toEqual({
      id: expect.stringMatching(/^prj_/),
      orgId: orgs[0].id,
      name: 'Checkout Ünïcode Team!',
      slug: 'checkout-unicode-team',
      description: 'Payments',
      tags: ['a', 'b'],
      requireWriteToken: false,
      guardrailAutoRollback: true,
      guardrailWindowMinutes: 15,
      requireInProcessCompatible: false,
      guardrailGuards: [],
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      role: 'owner',
    });
    const members = await user.request('GET', `/api/projects/${res.body.id}/members`);
    expect(members.body.members).toEqual([expect.objectContaining({ userId: user.id, role: 'owner' })]);
    const audit = await auditEntries(app, res.body.id, 'project.create');
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ user_id: user.id, after: expect.objectContaining({ slug: 'checkout-unicode-team' }) });
  });

  it('refuses a duplicate slug in the same org with 409, allows it in another org', async () => {
    const user = await app.signup();
    await createProject(user, { name: 'Web', slug: 'web' });
    const dup = await user.request('POST', '/api/projects', { name: 'Web' });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual({ error: 'Conflict', message: expect.stringContaining("'web'") });
    const org = (await user.request('POST', '/api/orgs', { name: 'Second' })).body;
    const other = await user.request('POST', '/api/projects', { name: 'Web', orgId: org.id });
    expect(other.status).toBe(201);
    expect(other.body).toMatchObject({ slug: 'web', orgId: org.id });
    // Now the slug is ambiguous for this user across orgs.
    const ambiguous = await user.request('GET', '/api/projects/by-slug/web');
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.message).toMatch(/orgId/);
    const exact = await user.request('GET', `/api/projects/by-slug/web?orgId=${org.id}`);
    expect(exact.status).toBe(200);
    expect(exact.body).toMatchObject({ id: other.body.id, role: 'owner' });
  });

  it('validates input: unknown fields, bad slug, empty name, underivable slug, NUL bytes, missing body', async () => {
    const user = await app.signup();
    const cases: [unknown, string][] = [
      [{ name: 'x', color: 'red' }, 'body'],
      [{ name: 'x', slug: 'Not A Slug' }, 'body.slug'],
      [{ name: '   ' }, 'body.name'],
      [{ name: 'x', tags: [1] }, 'body.tags.0'],
      [{ name: 'x\u0000y' }, 'body.name'],
      [undefined, 'body'],
    ];
    for (const [body, path] of cases) {
      const res = await user.request('POST', '/api/projects', body);
      expect(res.status).toBe(400);
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    const underivable = await user.request('POST', '/api/projects', { name: '!!!' });
    expect(underivable.status).toBe(400);
    expect(underivable.body.message).toMatch(/slug/);
    expect((await user.request('GET', '/api/projects')).body.projects).toEqual([]);
  });

  it('needs owner or admin of the target org; other orgs are 404', async () => {
    const orgOwner = await app.signup();
    const orgMember = await app.signup();
    const outsider = await app.signup();
    const org = (await orgOwner.request('POST', '/api/orgs', { name: 'Acme' })).body;
    await app.platform.db.sql`INSERT INTO org_members (org_id, user_id, role) VALUES (${org.id}, ${orgMember.id}, 'member')`;
    const byMember = await orgMember.request('POST', '/api/projects', { name: 'P', orgId: org.id });
    expect(byMember.status).toBe(403);
    expect(byMember.body.message).toMatch(/^Forbidden: .*owner or admin/);
    await app.platform.db.sql`UPDATE org_members SET role = 'admin' WHERE org_id = ${org.id} AND user_id = ${orgMember.id}`;
    expect((await orgMember.request('POST', '/api/projects', { name: 'P', orgId: org.id })).status).toBe(201);
    const byOutsider = await outsider.request('POST', '/api/projects', { name: 'P2', orgId: org.id });
    expect(byOutsider.status).toBe(404);
    expect((await outsider.request('POST', '/api/projects', { name: 'P3', orgId: 'org_nope' })).status).toBe(404);
  });

  it('needs CSRF for cookie sessions and a user credential with the admin tier', async () => {
    const user = await app.signup();
    const noCsrf = await app.request('POST', '/api/projects', { cookie: user.cookie, body: { name: 'x' } });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body.message).toMatch(/CSRF/);
    expect((await app.request('POST', '/api/projects', { body: { name: 'x' } })).status).toBe(401);
    const write = await creds.personal(user, 'write');
    const refused = await app.request('POST', '/api/projects', { token: write, body: { name: 'x' } });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe('Forbidden: personal access token lacks the admin tier');
    const admin = await creds.personal(user, 'admin');
    const ok = await app.request('POST', '/api/projects', { token: admin, body: { name: 'By token' } });
    expect(ok.status).toBe(201);
    const project = await createProject(user);
    const projectToken = await creds.project(project.id, ['read', 'write', 'delete', 'manage_settings', 'manage_members'], user);
    const byProjectToken = await app.request('POST', '/api/projects', { token: projectToken, body: { name: 'x' } });
    expect(byProjectToken.status).toBe(403);
    expect((await user.request('GET', '/api/projects')).body.projects).toHaveLength(2);
  });
});

describe('GET /api/projects, /api/projects/{id}, /api/projects/by-slug/{slug}', () => {
  it('lists only accessible projects, each with the caller role', async () => {
    const { project, owner, viewer } = await projectWithRoles(app);
    const own = await createProject(viewer, { name: 'Mine' });
    const list = (await viewer.request('GET', '/api/projects')).body.projects;
    expect(list.map((p: { id: string; role: string }) => [p.id, p.role]).sort()).toEqual([[own.id, 'owner'], [project.id, 'viewer']].sort());
    const ownerList = (await owner.request('GET', '/api/projects')).body.projects;
    expect(ownerList.map((p: { id: string }) => p.id)).toEqual([project.id]);
    expect((await app.request('GET', '/api/projects')).status).toBe(401);
  });

  it('reads one project by id and slug; non-members get 404, never data', async () => {
    const { project, member } = await projectWithRoles(app);
    const stranger = await app.signup();
    const byId = await member.request('GET', `/api/projects/${project.id}`);
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({ id: project.id, slug: project.slug, role: 'member' });
    const bySlug = await member.request('GET', `/api/projects/by-slug/${project.slug}`);
    expect(bySlug.body).toEqual(byId.body);
    for (const path of [`/api/projects/${project.id}`, `/api/projects/by-slug/${project.slug}`]) {
      const res = await stranger.request('GET', path);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'Not Found', message: 'Project not found' });
    }
    expect((await member.request('GET', '/api/projects/prj_missing')).status).toBe(404);
  });

  it('lets a project token read its own project only', async () => {
    const owner = await app.signup();
    const a = await createProject(owner);
    const b = await createProject(owner);
    const token = await creds.project(a.id, ['read'], owner);
    const own = await app.request('GET', `/api/projects/${a.id}`, { token });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ id: a.id, role: null });
    expect((await app.request('GET', `/api/projects/${b.id}`, { token })).status).toBe(404);
    expect((await app.request('GET', `/api/projects/by-slug/${b.slug}`, { token })).status).toBe(404);
    expect((await app.request('GET', `/api/projects/by-slug/${a.slug}`, { token })).body.id).toBe(a.id);
    const list = await app.request('GET', '/api/projects', { token });
    expect(list.body.projects.map((p: { id: string }) => p.id)).toEqual([a.id]);
    const writeOnly = await creds.project(a.id, ['write'], owner);
    const refused = await app.request('GET', `/api/projects/${a.id}`, { token: writeOnly });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe("Forbidden: You need 'read' permission");
  });
});

describe('PATCH /api/projects/{id}', () => {
  it('lets admins change settings but only owners change the slug; audits the change', async () => {
    const { project, owner, admin } = await projectWithRoles(app);
    const res = await admin.request('PATCH', `/api/projects/${project.id}`, { name: 'Renamed', tags: ['x'] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Renamed', tags: ['x'], slug: project.slug, role: 'admin' });
    expect(res.body.updatedAt >= res.body.createdAt).toBe(true);
    // Sending the unchanged slug is not a slug change.
    expect((await admin.request('PATCH', `/api/projects/${project.id}`, { slug: project.slug, description: 'd' })).status).toBe(200);
    const slug = await admin.request('PATCH', `/api/projects/${project.id}`, { slug: 'new-slug' });
    expect(slug.status).toBe(403);
    expect(slug.body.message).toBe("Forbidden: You need 'change_slug' permission");
    const byOwner = await owner.request('PATCH', `/api/projects/${project.id}`, { slug: 'new-slug' });
    expect(byOwner.status).toBe(200);
    expect(byOwner.body.slug).toBe('new-slug');
    const [update] = await auditEntries(app, project.id, 'project.update');
    expect(update.user_id).toBe(admin.id);
    expect(update.before.name).toBe(project.name);
    expect(update.after.name).toBe('Renamed');
  });

  it('refuses empty patches, unknown fields, slug collisions and callers without manage_settings', async () => {
    const { project, owner, member, viewer } = await projectWithRoles(app);
    const other = await createProject(owner, { name: 'Other', slug: 'taken-slug' });
    expect(other.slug).toBe('taken-slug');
    expect((await owner.request('PATCH', `/api/projects/${project.id}`, {})).status).toBe(400);
    expect((await owner.request('PATCH', `/api/projects/${project.id}`, { orgId: 'x' })).status).toBe(400);
    expect((await owner.request('PATCH', `/api/projects/${project.id}`, { slug: 'taken-slug' })).status).toBe(409);
    for (const user of [member, viewer]) {
      const res = await user.request('PATCH', `/api/projects/${project.id}`, { name: 'x' });
      expect(res.status).toBe(403);
      expect(res.body.message).toBe("Forbidden: You need 'manage_settings' permission");
    }
    const stranger = await app.signup();
    expect((await stranger.request('PATCH', `/api/projects/${project.id}`, { name: 'x' })).status).toBe(404);
    expect((await owner.request('GET', `/api/projects/${project.id}`)).body.name).toBe(project.name);
  });

  it('accepts a project token with manage_settings but never for the slug', async () => {
    const owner = await app.signup();
    const project = await createProject(owner);
    const token = await creds.project(project.id, ['manage_settings'], owner);
    expect((await app.request('PATCH', `/api/projects/${project.id}`, { token, body: { description: 'by token' } })).status).toBe(200);
    expect((await app.request('PATCH', `/api/projects/${project.id}`, { token, body: { slug: 'x-y' } })).status).toBe(403);
    const readToken = await creds.project(project.id, ['read'], owner);
    expect((await app.request('PATCH', `/api/projects/${project.id}`, { token: readToken, body: { description: 'x' } })).status).toBe(403);
  });
});

describe('DELETE /api/projects/{id}', () => {
  it('is owner-only, cascades to services, members and flags, and keeps a readable audit trail', async () => {
    const { project, owner, admin } = await projectWithRoles(app);
    const service = await createService(owner, project.id);
    await app.platform.db.sql`
      INSERT INTO flags (id, project_id, service_id, environment, key, name, type, default_value)
      VALUES ('flg_cascade', ${project.id}, ${service.id}, 'production', 'k', 'k', 'boolean', 'false')`;
    const byAdmin = await admin.request('DELETE', `/api/projects/${project.id}`);
    expect(byAdmin.status).toBe(403);
    expect(byAdmin.body.message).toBe("Forbidden: You need 'delete_project' permission");
    const res = await owner.request('DELETE', `/api/projects/${project.id}`);
    expect(res.status).toBe(204);
    expect((await owner.request('GET', `/api/projects/${project.id}`)).status).toBe(404);
    const { sql } = app.platform.db;
    expect(await sql`SELECT 1 FROM services WHERE project_id = ${project.id}`).toHaveLength(0);
    expect(await sql`SELECT 1 FROM project_members WHERE project_id = ${project.id}`).toHaveLength(0);
    expect(await sql`SELECT 1 FROM flags WHERE project_id = ${project.id}`).toHaveLength(0);
    // The org owner (the project creator's personal org) still reads the trail, ending in project.delete.
    const audit = await owner.request('GET', `/api/audit?projectId=${project.id}`);
    expect(audit.status).toBe(200);
    expect(audit.body.logs[0]).toMatchObject({ action: 'project.delete', resourceType: 'project', userId: owner.id });
    // A former admin of the project is not an owner of the org: no access any more.
    expect((await admin.request('GET', `/api/audit?projectId=${project.id}`)).status).toBe(404);
    expect((await owner.request('DELETE', `/api/projects/${project.id}`)).status).toBe(404);
  });

  it('needs a personal token with owner actions allowed', async () => {
    const owner = await app.signup();
    const project = await createProject(owner);
    const plainAdmin = await creds.personal(owner, 'admin');
    const refused = await app.request('DELETE', `/api/projects/${project.id}`, { token: plainAdmin });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe('Forbidden: this action needs an admin token created with owner actions allowed');
    const write = await creds.personal(owner, 'write');
    expect((await app.request('DELETE', `/api/projects/${project.id}`, { token: write })).status).toBe(403);
    // Owner actions exist only on the admin tier.
    expect((await owner.request('POST', '/api/users/me/personal-tokens', { name: 'w', tier: 'write', allowOwnerActions: true })).status).toBe(400);
    const ownerActions = await creds.personal(owner, 'admin', true);
    expect((await app.request('DELETE', `/api/projects/${project.id}`, { token: ownerActions })).status).toBe(204);
  });

  it('refuses CSRF-less cookie deletes and project tokens', async () => {
    const owner = await app.signup();
    const project = await createProject(owner);
    const csrf = await app.request('DELETE', `/api/projects/${project.id}`, { cookie: owner.cookie });
    expect(csrf.status).toBe(403);
    const token = await creds.project(project.id, ['read', 'write', 'delete', 'manage_settings', 'manage_members'], owner);
    expect((await app.request('DELETE', `/api/projects/${project.id}`, { token })).status).toBe(403);
    expect((await owner.request('GET', `/api/projects/${project.id}`)).status).toBe(200);
  });

  it('never deletes another user project (BOLA)', async () => {
    const a = await app.signup();
    const b = await app.signup();
    const projectB = await createProject(b);
    await addMember(b, projectB.id, await app.signup(), 'viewer');
    expect((await a.request('DELETE', `/api/projects/${projectB.id}`)).status).toBe(404);
    expect((await b.request('GET', `/api/projects/${projectB.id}`)).status).toBe(200);
  });
});

describe('OpenAPI', () => {
  it('documents every endpoint of projects, services, members, invitations, audit and watching', async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    const expected: Record<string, string[]> = {
      '/api/projects': ['get', 'post'],
      '/api/projects/{id}': ['get', 'patch', 'delete'],
      '/api/projects/by-slug/{slug}': ['get'],
      '/api/services': ['get', 'post'],
      '/api/services/{id}': ['get', 'patch', 'delete'],
      '/api/services/by-slug/{slug}': ['get'],
      '/api/projects/{id}/members': ['get', 'post'],
      '/api/projects/{id}/members/{memberId}': ['patch', 'delete'],
      '/api/projects/{id}/invitations': ['get', 'post'],
      '/api/projects/{id}/invitations/{invitationId}': ['delete'],
      '/api/invitations/{token}/accept': ['post'],
      '/api/audit': ['get'],
      '/api/flags/{key}/watch': ['get', 'post', 'delete'],
      '/api/notifications': ['get', 'post'],
    };
    for (const [path, methods] of Object.entries(expected)) {
      for (const method of methods) expect([path, method, Boolean(doc.paths[path]?.[method])]).toEqual([path, method, true]);
    }
    expect(doc.paths['/api/projects'].post.requestBody.content['application/json'].schema.additionalProperties).toBe(false);
  });
});

describe('with real tokens issued by the API', () => {
  it('an opaque read token reads its project; a personal token deletes only with owner actions', async () => {
    const owner = await app.signup({ verified: true });
    const project = await createProject(owner);
    const other = await createProject(owner);
    const projectToken = await owner.request('POST', `/api/projects/${project.id}/tokens`, { name: 'sdk', permissions: { read: true } });
    expect(projectToken.status).toBe(201);
    const read = await app.request('GET', `/api/projects/${project.id}`, { token: projectToken.body.value });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: project.id, role: null });
    expect((await app.request('GET', `/api/projects/${other.id}`, { token: projectToken.body.value })).status).toBe(404);

    const issue = async (allowOwnerActions: boolean) => {
      const res = await owner.request('POST', '/api/users/me/personal-tokens', { name: `pat-${allowOwnerActions}`, tier: 'admin', allowOwnerActions });
      expect(res.status).toBe(201);
      return res.body.value as string;
    };
    const plain = await issue(false);
    expect((await app.request('DELETE', `/api/projects/${project.id}`, { token: plain })).status).toBe(403);
    expect((await app.request('POST', '/api/projects', { token: plain, body: { name: 'Via PAT' } })).status).toBe(201);
    const withOwnerActions = await issue(true);
    expect((await app.request('DELETE', `/api/projects/${project.id}`, { token: withOwnerActions })).status).toBe(204);
  });
});
