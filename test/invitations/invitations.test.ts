import { createHash, randomBytes } from 'node:crypto';
import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';
import { addMember, auditEntries, createProject, projectWithRoles, testCredentials } from '../projects/support';

let app: TestApp;
let creds: ReturnType<typeof testCredentials>;
beforeAll(async () => {
  app = await startTestApp();
  creds = testCredentials(app);
});
afterAll(() => app?.stop());

const invitations = (projectId: string) => `/api/projects/${projectId}/invitations`;
const freshEmail = () => `invitee-${randomBytes(4).toString('hex')}@example.com`;

async function invite(by: TestUser, projectId: string, email: string, role = 'member') {
  const res = await by.request('POST', invitations(projectId), { email, role });
  if (res.status !== 201) throw new Error(`invite failed: ${res.status} ${res.text}`);
  return res.body as { id: string; email: string; role: string; status: string };
}

async function mailedToken(email: string): Promise<string> {
  const message = await eventually(async () => {
    const res = await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(email)}`);
    return res.body.messages?.find((m: { subject: string }) => /invited/.test(m.subject));
  });
  return message.token;
}

function expiryWorkflow(invitationId: string) {
  return app.platform.temporal.client.workflow.getHandle(`invitation-expiry-${invitationId}`);
}

describe('POST /api/projects/{id}/invitations', () => {
  it('creates a pending invitation, mails a token of which only the hash is stored, and starts the expiry timer', async () => {
    const { project, admin } = await projectWithRoles(app);
    const email = freshEmail();
    const res = await admin.request('POST', invitations(project.id), { email, role: 'viewer' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^inv_/),
      projectId: project.id,
      email,
      role: 'viewer',
      status: 'pending',
      invitedBy: admin.id,
      acceptedBy: null,
      createdAt: expect.any(String),
      expiresAt: expect.any(String),
      settledAt: null,
    });
    const lifetime = Date.parse(res.body.expiresAt) - Date.parse(res.body.createdAt);
    expect(Math.abs(lifetime - 7 * 24 * 3600_000)).toBeLessThan(5_000);
    expect(JSON.stringify(res.body)).not.toMatch(/token/i);

    const token = await mailedToken(email);
    expect(token).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    const [row] = await app.platform.db.sql`SELECT token_hash FROM invitations WHERE id = ${res.body.id}`;
    expect(row.token_hash).toBe(createHash('sha256').update(token).digest('hex'));
    const stored = await app.platform.db.sql`SELECT 1 FROM invitations WHERE token_hash = ${token} OR email = ${token}`;
    expect(stored).toHaveLength(0);

    const description = await expiryWorkflow(res.body.id).describe();
    expect(description.status.name).toBe('RUNNING');
    const [entry] = await auditEntries(app, project.id, 'invitation.create');
    expect(entry).toMatchObject({ resource_id: res.body.id, user_id: admin.id });
  });

  it('refuses owner invitations, bad input, duplicates and existing members', async () => {
    const { project, owner, member } = await projectWithRoles(app);
    const asOwner = await owner.request('POST', invitations(project.id), { email: freshEmail(), role: 'owner' });
    expect(asOwner.status).toBe(400);
    expect(asOwner.body.details).toEqual([{ path: 'body.role', message: expect.stringMatching(/owner is not allowed/) }]);
    for (const body of [{ email: 'not-an-email', role: 'member' }, { email: freshEmail(), role: 'root' }, { email: freshEmail(), role: 'member', note: 1 }, { role: 'member' }]) {
      expect((await owner.request('POST', invitations(project.id), body)).status).toBe(400);
    }
    const email = freshEmail();
    await invite(owner, project.id, email);
    const dup = await owner.request('POST', invitations(project.id), { email: email.toUpperCase(), role: 'viewer' });
    expect(dup.status).toBe(409);
    const existing = await owner.request('POST', invitations(project.id), { email: member.email.toUpperCase(), role: 'viewer' });
    expect(existing.status).toBe(409);
    expect(existing.body.message).toMatch(/already a member/);
    expect((await owner.request('GET', invitations(project.id))).body.invitations).toHaveLength(1);
  });

  it('is refused to members, viewers, strangers, personal tokens and missing CSRF; allowed to a read + manage_members project token', async () => {
    const { project, owner, member, viewer } = await projectWithRoles(app);
    for (const user of [member, viewer]) {
      const res = await user.request('POST', invitations(project.id), { email: freshEmail(), role: 'viewer' });
      expect(res.status).toBe(403);
      expect(res.body.message).toBe("Forbidden: You need 'manage_members' permission");
    }
    const stranger = await app.signup();
    expect((await stranger.request('POST', invitations(project.id), { email: freshEmail(), role: 'viewer' })).status).toBe(404);
    const pat = await creds.personal(owner, 'admin', true);
    const byPat = await app.request('POST', invitations(project.id), { token: pat, body: { email: freshEmail(), role: 'viewer' } });
    expect(byPat.status).toBe(403);
    expect(byPat.body.message).toBe('Forbidden: personal tokens cannot do this');
    expect((await app.request('POST', invitations(project.id), { cookie: owner.cookie, body: { email: freshEmail(), role: 'viewer' } })).status).toBe(403);
    expect((await app.request('POST', invitations(project.id), { body: { email: freshEmail(), role: 'viewer' } })).status).toBe(401);
    // A viewer reads flags: the token must hold read to grant it.
    const token = await creds.project(project.id, ['read', 'manage_members'], owner);
    const byToken = await app.request('POST', invitations(project.id), { token, body: { email: freshEmail(), role: 'viewer' } });
    expect(byToken.status).toBe(201);
    expect(byToken.body.invitedBy).toBe(owner.id);
    expect((await owner.request('GET', invitations(project.id))).body.invitations).toHaveLength(1);
  });
});

describe('GET /api/projects/{id}/invitations', () => {
  it('lists invitations to members:view holders with a status filter; strangers get 404', async () => {
    const { project, owner, viewer } = await projectWithRoles(app);
    const a = await invite(owner, project.id, freshEmail());
    const b = await invite(owner, project.id, freshEmail());
    expect((await owner.request('DELETE', `${invitations(project.id)}/${b.id}`)).status).toBe(204);
    const all = await viewer.request('GET', invitations(project.id));
    expect(all.status).toBe(200);
    expect(all.body.invitations.map((i: { id: string; status: string }) => [i.id, i.status])).toEqual([
      [b.id, 'cancelled'],
      [a.id, 'pending'],
    ]);
    const pending = await viewer.request('GET', `${invitations(project.id)}?status=pending`);
    expect(pending.body.invitations.map((i: { id: string }) => i.id)).toEqual([a.id]);
    expect((await viewer.request('GET', `${invitations(project.id)}?status=weird`)).status).toBe(400);
    const stranger = await app.signup();
    expect((await stranger.request('GET', invitations(project.id))).status).toBe(404);
  });
});

describe('POST /api/invitations/{token}/accept', () => {
  it('adds the invited user (e-mail matched case-insensitively), ends the timer and is single-use', async () => {
    const { project, owner } = await projectWithRoles(app);
    const email = freshEmail();
    const invitation = await invite(owner, project.id, email, 'admin');
    const token = await mailedToken(email);
    const invitee = await app.signup({ email: email.toUpperCase(), verified: true });
    const res = await invitee.request('POST', `/api/invitations/${token}/accept`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      membership: expect.objectContaining({ projectId: project.id, userId: invitee.id, role: 'admin' }),
      project: { id: project.id, orgId: project.orgId, name: project.name, slug: project.slug },
    });
    expect((await invitee.request('GET', `/api/projects/${project.id}`)).body.role).toBe('admin');
    await expect(expiryWorkflow(invitation.id).result()).resolves.toBe('settled');
    const listed = (await owner.request('GET', invitations(project.id))).body.invitations[0];
    expect(listed).toMatchObject({ id: invitation.id, status: 'accepted', acceptedBy: invitee.id, settledAt: expect.any(String) });
    const actions = (await auditEntries(app, project.id)).map((e) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['invitation.create', 'invitation.accept', 'member.add']));
    const again = await invitee.request('POST', `/api/invitations/${token}/accept`);
    expect(again.status).toBe(410);
    expect(again.body).toEqual({ error: 'Gone', message: 'This invitation has already been accepted' });
  });

  it('refuses another e-mail (403), unknown tokens (404), anonymous (401), personal tokens and missing CSRF (403)', async () => {
    const { project, owner } = await projectWithRoles(app);
    const email = freshEmail();
    await invite(owner, project.id, email);
    const token = await mailedToken(email);
    const other = await app.signup();
    const wrong = await other.request('POST', `/api/invitations/${token}/accept`);
    expect(wrong.status).toBe(403);
    expect(wrong.body.message).toMatch(/different e-mail/);
    expect((await other.request('POST', `/api/invitations/${'x'.repeat(43)}/accept`)).status).toBe(404);
    expect((await app.request('POST', `/api/invitations/${token}/accept`)).status).toBe(401);
    const invitee = await app.signup({ email, verified: true });
    const pat = await creds.personal(invitee, 'admin', true);
    const byPat = await app.request('POST', `/api/invitations/${token}/accept`, { token: pat });
    expect(byPat.status).toBe(403);
    expect(byPat.body.message).toBe('Forbidden: personal tokens cannot do this');
    expect((await app.request('POST', `/api/invitations/${token}/accept`, { cookie: invitee.cookie })).status).toBe(403);
    expect((await invitee.request('GET', `/api/projects/${project.id}`)).status).toBe(404);
    // Still pending and usable by the right session.
    expect((await invitee.request('POST', `/api/invitations/${token}/accept`)).status).toBe(200);
  });

  it('answers 410 for expired invitations, which also no longer block a new invitation', async () => {
    const { project, owner } = await projectWithRoles(app);
    const email = freshEmail();
    const invitation = await invite(owner, project.id, email);
    const token = await mailedToken(email);
    await app.platform.db.sql`UPDATE invitations SET expires_at = now() - interval '1 second' WHERE id = ${invitation.id}`;
    const invitee = await app.signup({ email, verified: true });
    const res = await invitee.request('POST', `/api/invitations/${token}/accept`);
    expect(res.status).toBe(410);
    expect(res.body.message).toBe('This invitation has expired');
    expect((await owner.request('GET', invitations(project.id))).body.invitations[0].status).toBe('expired');
    expect((await invitee.request('GET', `/api/projects/${project.id}`)).status).toBe(404);
    const again = await owner.request('POST', invitations(project.id), { email, role: 'viewer' });
    expect(again.status).toBe(201);
  });

  it('keeps the current role of a user who became a member meanwhile', async () => {
    const { project, owner } = await projectWithRoles(app);
    const email = freshEmail();
    await invite(owner, project.id, email, 'admin');
    const token = await mailedToken(email);
    const invitee = await app.signup({ email, verified: true });
    await addMember(owner, project.id, invitee, 'viewer');
    const res = await invitee.request('POST', `/api/invitations/${token}/accept`);
    expect(res.status).toBe(200);
    expect(res.body.membership.role).toBe('viewer');
    const [entry] = await auditEntries(app, project.id, 'invitation.accept');
    expect(entry.metadata).toEqual({ alreadyMember: true, keptRole: 'viewer' });
  });
});

describe('DELETE /api/projects/{id}/invitations/{invitationId}', () => {
  it('cancels a pending invitation, ends its timer, and the token stops working', async () => {
    const { project, admin } = await projectWithRoles(app);
    const email = freshEmail();
    const invitation = await invite(admin, project.id, email);
    const token = await mailedToken(email);
    expect((await admin.request('DELETE', `${invitations(project.id)}/${invitation.id}`)).status).toBe(204);
    await expect(expiryWorkflow(invitation.id).result()).resolves.toBe('settled');
    const invitee = await app.signup({ email, verified: true });
    const res = await invitee.request('POST', `/api/invitations/${token}/accept`);
    expect(res.status).toBe(410);
    expect(res.body.message).toBe('This invitation has been cancelled');
    const again = await admin.request('DELETE', `${invitations(project.id)}/${invitation.id}`);
    expect(again.status).toBe(409);
    const [entry] = await auditEntries(app, project.id, 'invitation.cancel');
    expect(entry).toMatchObject({ resource_id: invitation.id, user_id: admin.id, after: expect.objectContaining({ status: 'cancelled' }) });
  });

  it('is refused to members and viewers, and 404 across projects (BOLA)', async () => {
    const { project, owner, member, viewer } = await projectWithRoles(app);
    const invitation = await invite(owner, project.id, freshEmail());
    for (const user of [member, viewer]) expect((await user.request('DELETE', `${invitations(project.id)}/${invitation.id}`)).status).toBe(403);
    const other = await app.signup();
    const otherProject = await createProject(other);
    // Another project's owner, through their own project's path and through ours.
    expect((await other.request('DELETE', `${invitations(otherProject.id)}/${invitation.id}`)).status).toBe(404);
    expect((await other.request('DELETE', `${invitations(project.id)}/${invitation.id}`)).status).toBe(404);
    expect((await other.request('GET', invitations(project.id))).status).toBe(404);
    expect((await owner.request('DELETE', `${invitations(project.id)}/inv_missing`)).status).toBe(404);
    expect((await owner.request('GET', invitations(project.id))).body.invitations[0].status).toBe('pending');
  });

  it('project deletion removes invitations and settles their timers', async () => {
    const owner = await app.signup();
    const project = await createProject(owner);
    const invitation = await invite(owner, project.id, freshEmail());
    expect((await owner.request('DELETE', `/api/projects/${project.id}`)).status).toBe(204);
    await expect(expiryWorkflow(invitation.id).result()).resolves.toBe('settled');
    expect(await app.platform.db.sql`SELECT 1 FROM invitations WHERE id = ${invitation.id}`).toHaveLength(0);
  });
});
