import { randomBytes } from 'node:crypto';
import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { addMember, createProject, createService, projectWithRoles, testCredentials } from '../projects/support';

let app: TestApp;
let creds: ReturnType<typeof testCredentials>;
beforeAll(async () => {
  app = await startTestApp();
  creds = testCredentials(app);
});
afterAll(() => app?.stop());

const watchPath = (key: string) => `/api/flags/${key}/watch`;
const targetQuery = (serviceId: string, environment = 'production') => `serviceId=${serviceId}&environment=${environment}`;

/** A flag row written directly, as the flags feature stores it. */
async function insertFlag(projectId: string, serviceId: string, key: string, environment = 'production') {
  const id = `flg_${randomBytes(6).toString('hex')}`;
  await app.platform.db.sql`
    INSERT INTO flags (id, project_id, service_id, environment, key, name, type, default_value)
    VALUES (${id}, ${projectId}, ${serviceId}, ${environment}, ${key}, ${key}, 'boolean', 'false')`;
  return id;
}

/** A flag audit entry as the flags feature writes it: resourceId = flag id, resourceName = key. */
async function flagAudit(projectId: string, flagId: string, key: string, by: TestUser | null, action = 'flag.update') {
  const id = `aud_${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
  await app.platform.db.sql`
    INSERT INTO audit_logs (id, project_id, user_id, actor, action, resource_type, resource_id, resource_name, changes)
    VALUES (${id}, ${projectId}, ${by?.id ?? null}, ${by?.email ?? 'trigger:nightly'}, ${action}, 'flag', ${flagId}, ${key},
            ${app.platform.db.sql.json([{ field: 'enabled', oldValue: false, newValue: true }])})`;
  return id;
}

async function setup() {
  const roles = await projectWithRoles(app);
  const service = await createService(roles.owner, roles.project.id);
  const key = `checkout-${randomBytes(3).toString('hex')}`;
  const flagId = await insertFlag(roles.project.id, service.id, key);
  return { ...roles, service, key, flagId };
}

describe('POST/GET/DELETE /api/flags/{key}/watch', () => {
  it('watches, reports and unwatches a flag per service and environment, idempotently', async () => {
    const { viewer, service, key } = await setup();
    expect((await viewer.request('GET', `${watchPath(key)}?${targetQuery(service.id)}`)).body).toEqual({
      watching: false,
      serviceId: service.id,
      environment: 'production',
      flagKey: key,
    });
    const res = await viewer.request('POST', watchPath(key), { serviceId: service.id, environment: 'production' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ watching: true, serviceId: service.id, environment: 'production', flagKey: key, since: expect.any(String) });
    const again = await viewer.request('POST', watchPath(key), { serviceId: service.id, environment: 'production' });
    expect(again.body.since).toBe(res.body.since);
    expect((await viewer.request('GET', `${watchPath(key)}?${targetQuery(service.id)}`)).body.watching).toBe(true);
    // Environments are watched separately.
    expect((await viewer.request('GET', `${watchPath(key)}?${targetQuery(service.id, 'staging')}`)).body.watching).toBe(false);
    const off = await viewer.request('DELETE', `${watchPath(key)}?${targetQuery(service.id)}`);
    expect(off.status).toBe(200);
    expect(off.body.watching).toBe(false);
    expect((await viewer.request('GET', `${watchPath(key)}?${targetQuery(service.id)}`)).body.watching).toBe(false);
    expect((await viewer.request('DELETE', `${watchPath(key)}?${targetQuery(service.id)}`)).status).toBe(200);
  });

  it('validates input and answers 404 for unknown flags and services', async () => {
    const { owner, service, key } = await setup();
    for (const body of [{ environment: 'production' }, { serviceId: service.id }, { serviceId: service.id, environment: 'prod' }, { serviceId: service.id, environment: 'production', x: 1 }]) {
      expect((await owner.request('POST', watchPath(key), body)).status).toBe(400);
    }
    expect((await owner.request('GET', `${watchPath(key)}?serviceId=${service.id}`)).status).toBe(400);
    expect((await owner.request('DELETE', `${watchPath(key)}?environment=production`)).status).toBe(400);
    const missingFlag = await owner.request('POST', watchPath('no-such-flag'), { serviceId: service.id, environment: 'production' });
    expect(missingFlag.status).toBe(404);
    expect(missingFlag.body.message).toBe('Flag not found');
    // The flag exists in production only.
    expect((await owner.request('POST', watchPath(key), { serviceId: service.id, environment: 'staging' })).status).toBe(404);
    const missingService = await owner.request('POST', watchPath(key), { serviceId: 'svc_missing', environment: 'production' });
    expect(missingService.status).toBe(404);
    expect(missingService.body.message).toBe('Service not found');
  });

  it('needs flags:read on the flag project: strangers get 404; project tokens and anonymous callers are refused', async () => {
    const { owner, project, service, key } = await setup();
    const stranger = await app.signup();
    for (const [method, path, body] of [
      ['POST', watchPath(key), { serviceId: service.id, environment: 'production' }],
      ['GET', `${watchPath(key)}?${targetQuery(service.id)}`, undefined],
      ['DELETE', `${watchPath(key)}?${targetQuery(service.id)}`, undefined],
    ] as const) {
      const res = await stranger.request(method, path, body);
      expect(res.status).toBe(404);
      expect(res.body.message).toBe('Service not found');
      expect((await app.request(method, path, { body })).status).toBe(401);
    }
    const token = await creds.project(project.id, ['read'], owner);
    expect((await app.request('POST', watchPath(key), { token, body: { serviceId: service.id, environment: 'production' } })).status).toBe(403);
    expect((await app.request('POST', watchPath(key), { cookie: owner.cookie, body: { serviceId: service.id, environment: 'production' } })).status).toBe(403);
    const readPat = await creds.personal(owner, 'read');
    expect((await app.request('POST', watchPath(key), { token: readPat, body: { serviceId: service.id, environment: 'production' } })).status).toBe(403);
    expect((await app.request('GET', `${watchPath(key)}?${targetQuery(service.id)}`, { token: readPat })).body.watching).toBe(false);
    const writePat = await creds.personal(owner, 'write');
    expect((await app.request('POST', watchPath(key), { token: writePat, body: { serviceId: service.id, environment: 'production' } })).body.watching).toBe(true);
  });
});

describe('GET/POST /api/notifications', () => {
  it('lists changes by others to watched flags since the watch, with read state and unreadCount', async () => {
    const { project, owner, admin, viewer, service, key, flagId } = await setup();
    const otherFlag = await insertFlag(project.id, service.id, `${key}-other`);
    const stagingCopy = await insertFlag(project.id, service.id, key, 'staging');
    await flagAudit(project.id, flagId, key, owner); // before the watch: not a notification
    await new Promise((r) => setTimeout(r, 5));
    expect((await viewer.request('POST', watchPath(key), { serviceId: service.id, environment: 'production' })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 5));
    const byOwner = await flagAudit(project.id, flagId, key, owner, 'flag.toggle');
    await flagAudit(project.id, flagId, key, viewer); // the watcher's own change
    await flagAudit(project.id, otherFlag, `${key}-other`, owner); // another flag
    await flagAudit(project.id, stagingCopy, key, owner); // another environment
    const byTrigger = await flagAudit(project.id, flagId, key, null);
    const res = await viewer.request('GET', '/api/notifications');
    expect(res.status).toBe(200);
    expect(res.body.unreadCount).toBe(2);
    expect(res.body.notifications.map((n: { id: string }) => n.id)).toEqual([byTrigger, byOwner]);
    expect(res.body.notifications[1]).toEqual({
      id: byOwner,
      projectId: project.id,
      serviceId: service.id,
      environment: 'production',
      flagKey: key,
      userId: owner.id,
      actor: owner.email,
      action: 'flag.toggle',
      resourceType: 'flag',
      resourceId: flagId,
      resourceName: key,
      changes: [{ field: 'enabled', oldValue: false, newValue: true }],
      metadata: {},
      timestamp: expect.any(String),
      read: false,
    });
    // Someone else's notifications are their own: the admin watches nothing.
    expect((await admin.request('GET', '/api/notifications')).body).toEqual({ notifications: [], unreadCount: 0 });

    const marked = await viewer.request('POST', '/api/notifications');
    expect(marked.status).toBe(200);
    expect(marked.body).toEqual({ unreadCount: 0, readAt: expect.any(String) });
    const after = (await viewer.request('GET', '/api/notifications')).body;
    expect(after.unreadCount).toBe(0);
    expect(after.notifications.every((n: { read: boolean }) => n.read)).toBe(true);
    await new Promise((r) => setTimeout(r, 5));
    const fresh = await flagAudit(project.id, flagId, key, admin);
    const later = (await viewer.request('GET', '/api/notifications?limit=1')).body;
    expect(later).toEqual({ unreadCount: 1, notifications: [expect.objectContaining({ id: fresh, read: false })] });
    expect((await viewer.request('GET', '/api/notifications?limit=0')).status).toBe(400);
  });

  it('stops notifying when the user loses access to the project or unwatches', async () => {
    const { project, owner, member, service, key, flagId } = await setup();
    await member.request('POST', watchPath(key), { serviceId: service.id, environment: 'production' });
    await new Promise((r) => setTimeout(r, 5));
    await flagAudit(project.id, flagId, key, owner);
    expect((await member.request('GET', '/api/notifications')).body.unreadCount).toBe(1);
    expect((await owner.request('DELETE', `/api/projects/${project.id}/members/${member.id}`)).status).toBe(204);
    expect((await member.request('GET', '/api/notifications')).body).toEqual({ notifications: [], unreadCount: 0 });
    await addMember(owner, project.id, member, 'viewer');
    expect((await member.request('GET', '/api/notifications')).body.unreadCount).toBe(1);
    await member.request('DELETE', `${watchPath(key)}?${targetQuery(service.id)}`);
    expect((await member.request('GET', '/api/notifications')).body.unreadCount).toBe(0);
  });

  it('needs a user credential and CSRF to mark read', async () => {
    const user = await app.signup();
    expect((await app.request('GET', '/api/notifications')).status).toBe(401);
    expect((await app.request('POST', '/api/notifications', { cookie: user.cookie })).status).toBe(403);
    const project = await createProject(user);
    const token = await creds.project(project.id, ['read'], user);
    expect((await app.request('GET', '/api/notifications', { token })).status).toBe(403);
    const pat = await creds.personal(user, 'read');
    expect((await app.request('GET', '/api/notifications', { token: pat })).status).toBe(200);
  });

  it('follows changes made through the flags API, including deletion and re-creation', async () => {
    const { project, owner, viewer } = await setup();
    const service = await createService(owner, project.id);
    const key = `api-flag-${randomBytes(3).toString('hex')}`;
    const created = await owner.request('POST', '/api/flags', { key, serviceId: service.id, environment: 'production', name: 'Api flag', type: 'boolean' });
    expect(created.status).toBe(201);
    expect((await viewer.request('POST', watchPath(key), { serviceId: service.id, environment: 'production' })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 5));
    const q = targetQuery(service.id);
    expect((await owner.request('POST', `/api/flags/${key}/toggle?${q}`, {})).status).toBe(200);
    expect((await owner.request('PATCH', `/api/flags/${key}?${q}`, { description: 'now described' })).status).toBe(200);
    const deleted = await owner.request('DELETE', `/api/flags/${key}?${q}`);
    expect([200, 204]).toContain(deleted.status);
    // The watch survives the flag; a re-created flag with the same key is followed.
    expect((await viewer.request('GET', `${watchPath(key)}?${q}`)).body.watching).toBe(true);
    expect((await owner.request('POST', '/api/flags', { key, serviceId: service.id, environment: 'production', name: 'Again', type: 'boolean' })).status).toBe(201);
    const res = (await viewer.request('GET', '/api/notifications')).body;
    expect(res.notifications.map((n: { action: string }) => n.action)).toEqual(['flag.create', 'flag.delete', 'flag.update', 'flag.toggle']);
    expect(res.notifications.every((n: { flagKey: string; userId: string }) => n.flagKey === key && n.userId === owner.id)).toBe(true);
    expect(res.unreadCount).toBe(4);
    // The owner's own changes never notify the owner.
    await owner.request('POST', watchPath(key), { serviceId: service.id, environment: 'production' });
    expect((await viewer.request('POST', `/api/flags/${key}/toggle?${q}`, {})).status).toBe(403);
    expect((await owner.request('GET', '/api/notifications')).body.unreadCount).toBe(0);
  });
});
