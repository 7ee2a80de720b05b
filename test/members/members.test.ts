import { startTestApp, type TestApp } from '../support/harness';
import { addMember, auditEntries, createProject, projectWithRoles, testCredentials } from '../projects/support';

let app: TestApp;
let creds: ReturnType<typeof testCredentials>;
beforeAll(async () => {
  app = await startTestApp();
  creds = testCredentials(app);
});
afterAll(() => app?.stop());

const path = (projectId: string, memberId?: string) => `/api/projects/${projectId}/members${memberId ? `/${memberId}` : ''}`;

describe('GET /api/projects/{id}/members', () => {
  it('lists members with roles to every role; strangers and other projects tokens get 404', async () => {
    const { project, owner, admin, member, viewer } = await projectWithRoles(app);
    for (const user of [owner, admin, member, viewer]) {
      const res = await user.request('GET', path(project.id));
      expect(res.status).toBe(200);
      expect(res.body.members.map((m: { userId: string; role: string }) => [m.userId, m.role])).toEqual([
        [owner.id, 'owner'],
        [admin.id, 'admin'],
        [member.id, 'member'],
        [viewer.id, 'viewer'],
      ]);
      expect(res.body.members[0]).toEqual({
        projectId: project.id,
        userId: owner.id,
        email: owner.email,
        name: expect.any(String),
        role: 'owner',
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      });
    }
    const stranger = await app.signup();
    expect((await stranger.request('GET', path(project.id))).status).toBe(404);
    const foreignToken = await creds.project((await createProject(stranger)).id, ['read', 'manage_members'], stranger);
    expect((await app.request('GET', path(project.id), { token: foreignToken })).status).toBe(404);
    const readToken = await creds.project(project.id, ['read'], owner);
    expect((await app.request('GET', path(project.id), { token: readToken })).status).toBe(403);
    const membersToken = await creds.project(project.id, ['manage_members'], owner);
    expect((await app.request('GET', path(project.id), { token: membersToken })).body.members).toHaveLength(4);
  });
});

describe('POST /api/projects/{id}/members', () => {
  it('adds a user with members:manage and audits member.add', async () => {
    const { project, admin } = await projectWithRoles(app);
    const newcomer = await app.signup();
    const res = await admin.request('POST', path(project.id), { userId: newcomer.id, role: 'member' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ projectId: project.id, userId: newcomer.id, email: newcomer.email, role: 'member' });
    expect((await newcomer.request('GET', `/api/projects/${project.id}`)).body.role).toBe('member');
    const [entry] = (await auditEntries(app, project.id, 'member.add')).filter((e) => e.resource_id === newcomer.id);
    expect(entry).toMatchObject({ user_id: admin.id, after: { userId: newcomer.id, email: newcomer.email, role: 'member' } });
  });

  it('refuses duplicates (409), unknown users (404), bad roles and unknown fields (400)', async () => {
    const { project, owner, member } = await projectWithRoles(app);
    const dup = await owner.request('POST', path(project.id), { userId: member.id, role: 'viewer' });
    expect(dup.status).toBe(409);
    expect((await owner.request('POST', path(project.id), { userId: 'usr_missing', role: 'viewer' })).status).toBe(404);
    const newcomer = await app.signup();
    expect((await owner.request('POST', path(project.id), { userId: newcomer.id, role: 'superuser' })).status).toBe(400);
    expect((await owner.request('POST', path(project.id), { userId: newcomer.id, role: 'viewer', note: 'x' })).status).toBe(400);
    expect((await owner.request('POST', path(project.id), { role: 'viewer' })).status).toBe(400);
    expect((await app.request('POST', path(project.id), { cookie: owner.cookie, body: { userId: newcomer.id, role: 'viewer' } })).status).toBe(403);
    expect((await newcomer.request('GET', `/api/projects/${project.id}`)).status).toBe(404);
  });

  it('lets only owners grant owner, and personal tokens only with owner actions', async () => {
    const { project, owner, admin } = await projectWithRoles(app);
    const a = await app.signup();
    const byAdmin = await admin.request('POST', path(project.id), { userId: a.id, role: 'owner' });
    expect(byAdmin.status).toBe(403);
    expect(byAdmin.body.message).toBe("Forbidden: You need 'manage_owners' permission");
    const adminPat = await creds.personal(owner, 'admin');
    const noOptIn = await app.request('POST', path(project.id), { token: adminPat, body: { userId: a.id, role: 'owner' } });
    expect(noOptIn.status).toBe(403);
    expect(noOptIn.body.message).toMatch(/owner actions allowed/);
    // The same token may add non-owners.
    expect((await app.request('POST', path(project.id), { token: adminPat, body: { userId: a.id, role: 'viewer' } })).status).toBe(201);
    const b = await app.signup();
    const ownerPat = await creds.personal(owner, 'admin', true);
    expect((await app.request('POST', path(project.id), { token: ownerPat, body: { userId: b.id, role: 'owner' } })).status).toBe(201);
    const c = await app.signup();
    expect((await owner.request('POST', path(project.id), { userId: c.id, role: 'owner' })).status).toBe(201);
    const writePat = await creds.personal(owner, 'write');
    const write = await app.request('POST', path(project.id), { token: writePat, body: { userId: (await app.signup()).id, role: 'viewer' } });
    expect(write.status).toBe(403);
    expect(write.body.message).toBe('Forbidden: personal access token lacks the admin tier');
    const membersToken = await creds.project(project.id, ['manage_members'], owner);
    expect((await app.request('POST', path(project.id), { token: membersToken, body: { userId: (await app.signup()).id, role: 'owner' } })).status).toBe(403);
    // A token grants no role beyond its own scopes.
    expect((await app.request('POST', path(project.id), { token: membersToken, body: { userId: (await app.signup()).id, role: 'admin' } })).status).toBe(403);
    const fullToken = await creds.project(project.id, ['read', 'write', 'delete', 'manage_settings', 'manage_members'], owner);
    expect((await app.request('POST', path(project.id), { token: fullToken, body: { userId: (await app.signup()).id, role: 'admin' } })).status).toBe(201);
  });
});

describe('PATCH /api/projects/{id}/members/{memberId}', () => {
  it('changes roles with members:manage and audits member.role_change', async () => {
    const { project, admin, viewer } = await projectWithRoles(app);
    const res = await admin.request('PATCH', path(project.id, viewer.id), { role: 'member' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ userId: viewer.id, role: 'member' });
    const [entry] = await auditEntries(app, project.id, 'member.role_change');
    expect(entry).toMatchObject({ resource_id: viewer.id, before: { role: 'viewer' }, after: { role: 'member' } });
    // Same role: nothing changes and nothing is audited.
    expect((await admin.request('PATCH', path(project.id, viewer.id), { role: 'member' })).status).toBe(200);
    expect(await auditEntries(app, project.id, 'member.role_change')).toHaveLength(1);
    expect((await admin.request('PATCH', path(project.id, 'usr_missing'), { role: 'member' })).status).toBe(404);
    expect((await admin.request('PATCH', path(project.id, viewer.id), { role: 'root' })).status).toBe(400);
    expect((await admin.request('PATCH', path(project.id, viewer.id), {})).status).toBe(400);
  });

  it('keeps owner changes to owners and never demotes the last owner (409)', async () => {
    const { project, owner, admin, member } = await projectWithRoles(app);
    const promote = await admin.request('PATCH', path(project.id, member.id), { role: 'owner' });
    expect(promote.status).toBe(403);
    const demoteOwner = await admin.request('PATCH', path(project.id, owner.id), { role: 'viewer' });
    expect(demoteOwner.status).toBe(403);
    const last = await owner.request('PATCH', path(project.id, owner.id), { role: 'admin' });
    expect(last.status).toBe(409);
    expect(last.body.message).toMatch(/at least one owner/);
    // Transfer: promote someone, then step down.
    expect((await owner.request('PATCH', path(project.id, admin.id), { role: 'owner' })).status).toBe(200);
    expect((await owner.request('PATCH', path(project.id, owner.id), { role: 'admin' })).status).toBe(200);
    expect((await admin.request('GET', path(project.id))).body.members.filter((m: { role: string }) => m.role === 'owner')).toHaveLength(1);
    const tokenWithoutOptIn = await creds.personal(admin, 'admin');
    expect((await app.request('PATCH', path(project.id, owner.id), { token: tokenWithoutOptIn, body: { role: 'owner' } })).status).toBe(403);
    const tokenWithOptIn = await creds.personal(admin, 'admin', true);
    expect((await app.request('PATCH', path(project.id, owner.id), { token: tokenWithOptIn, body: { role: 'owner' } })).status).toBe(200);
  });

  it('refuses members, viewers and strangers', async () => {
    const { project, member, viewer, admin } = await projectWithRoles(app);
    for (const user of [member, viewer]) {
      const res = await user.request('PATCH', path(project.id, admin.id), { role: 'viewer' });
      expect(res.status).toBe(403);
      expect(res.body.message).toBe("Forbidden: You need 'manage_members' permission");
    }
    const stranger = await app.signup();
    expect((await stranger.request('PATCH', path(project.id, admin.id), { role: 'viewer' })).status).toBe(404);
    expect((await admin.request('GET', path(project.id))).body.members.find((m: { userId: string }) => m.userId === admin.id).role).toBe('admin');
  });

  it('serialises concurrent demotions so one owner always remains', async () => {
    const owner = await app.signup();
    const second = await app.signup();
    const project = await createProject(owner);
    await addMember(owner, project.id, second, 'owner');
    const results = await Promise.all([
      owner.request('PATCH', path(project.id, owner.id), { role: 'admin' }),
      second.request('PATCH', path(project.id, second.id), { role: 'admin' }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    const [row] = await app.platform.db.sql`SELECT count(*)::int AS n FROM project_members WHERE project_id = ${project.id} AND role = 'owner'`;
    expect(row.n).toBe(1);
  });
});

describe('DELETE /api/projects/{id}/members/{memberId}', () => {
  it('removes members with members:manage, audits member.remove, and access ends at once', async () => {
    const { project, admin, member } = await projectWithRoles(app);
    const res = await admin.request('DELETE', path(project.id, member.id));
    expect(res.status).toBe(204);
    expect((await member.request('GET', `/api/projects/${project.id}`)).status).toBe(404);
    const [entry] = await auditEntries(app, project.id, 'member.remove');
    expect(entry).toMatchObject({ resource_id: member.id, user_id: admin.id, before: { role: 'member' } });
    expect((await admin.request('DELETE', path(project.id, member.id))).status).toBe(404);
  });

  it('lets anyone leave, except the last owner; only owners remove owners', async () => {
    const { project, owner, admin, member, viewer } = await projectWithRoles(app);
    expect((await viewer.request('DELETE', path(project.id, admin.id))).status).toBe(403);
    // Membership changes by personal token need the admin tier, leaving included.
    const writePat = await creds.personal(viewer, 'write');
    const byWritePat = await app.request('DELETE', path(project.id, viewer.id), { token: writePat });
    expect(byWritePat.status).toBe(403);
    expect(byWritePat.body.message).toBe('Forbidden: personal access token lacks the admin tier');
    expect((await viewer.request('DELETE', path(project.id, viewer.id))).status).toBe(204);
    const [leave] = await auditEntries(app, project.id, 'member.remove');
    expect(leave.metadata).toEqual({ selfRemoval: true });
    expect((await admin.request('DELETE', path(project.id, owner.id))).status).toBe(403);
    const last = await owner.request('DELETE', path(project.id, owner.id));
    expect(last.status).toBe(409);
    await addMember(owner, project.id, viewer, 'owner');
    expect((await viewer.request('DELETE', path(project.id, owner.id))).status).toBe(204);
    expect((await viewer.request('GET', path(project.id))).body.members.map((m: { userId: string }) => m.userId).sort()).toEqual([admin.id, member.id, viewer.id].sort());
  });

  it('never touches another project membership (BOLA)', async () => {
    const a = await app.signup();
    const b = await app.signup();
    const projectA = await createProject(a);
    const projectB = await createProject(b);
    const bMember = await app.signup();
    await addMember(b, projectB.id, bMember, 'member');
    // a is owner of A, not of B: the memberId of B through A's path is simply not a member there.
    expect((await a.request('DELETE', path(projectA.id, bMember.id))).status).toBe(404);
    expect((await a.request('DELETE', path(projectB.id, bMember.id))).status).toBe(404);
    expect((await a.request('PATCH', path(projectB.id, bMember.id), { role: 'viewer' })).status).toBe(404);
    expect((await a.request('POST', path(projectB.id), { userId: a.id, role: 'owner' })).status).toBe(404);
    expect((await bMember.request('GET', `/api/projects/${projectB.id}`)).body.role).toBe('member');
  });
});
