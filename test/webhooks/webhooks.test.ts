import { startTestApp, type TestApp } from '../support/harness';
import { createProject, createWebhook, jwtToken, opaqueToken, personalToken, qs, type Project } from './support';

/**
 * Webhook CRUD (docs/api-reference.md#webhooks): fields, validation, secrecy, roles, credentials
 * and BOLA.
 */

let app: TestApp;
let p: Project;
let other: Project;
beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
});
afterAll(() => app?.stop());

const hookUrl = 'http://127.0.0.1:9/hook';

describe('create, read, list', () => {
  it('creates a webhook with defaults and returns the generated secret only once', async () => {
    const res = await p.owner.request('POST', '/api/webhooks', { projectId: p.projectId, url: hookUrl });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(String),
      projectId: p.projectId,
      url: hookUrl,
      events: ['flag.created', 'flag.updated', 'flag.deleted', 'flag.toggled'],
      active: true,
      createdBy: p.owner.id,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });

    const one = await p.owner.request('GET', `/api/webhooks/${res.body.id}`);
    expect(one.status).toBe(200);
    expect(one.body).not.toHaveProperty('secret');
    expect(one.body).toMatchObject({ id: res.body.id, url: hookUrl, active: true });
    expect(one.text).not.toContain(res.body.secret.slice(6, 30));

    const list = await p.owner.request('GET', `/api/webhooks${qs({ projectId: p.projectId })}`);
    expect(list.status).toBe(200);
    expect(list.body.webhooks.map((w: { id: string }) => w.id)).toContain(res.body.id);
    expect(list.text).not.toContain('secret');

    const [row] = await app.platform.db.sql`SELECT secret FROM webhooks WHERE id = ${res.body.id}`;
    expect(row.secret).toBe(res.body.secret);
  });

  it('stores a custom secret and event subset on a resolvable host', async () => {
    const res = await p.owner.request('POST', '/api/webhooks', {
      projectId: p.projectId,
      url: 'http://localhost:9/custom',
      secret: 'my-own-secret',
      events: ['flag.toggled', 'flag.deleted', 'flag.toggled'],
      active: false,
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ url: 'http://localhost:9/custom', secret: 'my-own-secret', events: ['flag.toggled', 'flag.deleted'], active: false });
  });

  it('lists only the requested project and needs projectId', async () => {
    const mine = await createWebhook(p.owner, { projectId: p.projectId, url: hookUrl });
    const theirs = await createWebhook(other.owner, { projectId: other.projectId, url: hookUrl });
    const list = await p.owner.request('GET', `/api/webhooks${qs({ projectId: p.projectId })}`);
    const ids = list.body.webhooks.map((w: { id: string }) => w.id);
    expect(ids).toContain(mine.id);
    expect(ids).not.toContain(theirs.id);
    expect(list.body.webhooks.every((w: { projectId: string }) => w.projectId === p.projectId)).toBe(true);

    const missing = await p.owner.request('GET', '/api/webhooks');
    expect(missing.status).toBe(400);
    expect(missing.body.details).toEqual([{ path: 'query.projectId', message: expect.any(String) }]);
  });

  it.each([
    ['missing projectId', { projectId: undefined, url: hookUrl }, 'body.projectId'],
    ['missing url', { events: ['flag.created'] }, 'body.url'],
    ['not a URL', { url: 'not a url' }, 'body.url'],
    ['ftp scheme', { url: 'ftp://127.0.0.1/x' }, 'body.url'],
    ['credentials in the URL', { url: 'http://user:pw@127.0.0.1/x' }, 'body.url'],
    ['unknown event', { url: hookUrl, events: ['flag.exploded'] }, 'body.events.0'],
    ['empty events', { url: hookUrl, events: [] }, 'body.events'],
    ['empty secret', { url: hookUrl, secret: '' }, 'body.secret'],
    ['active not boolean', { url: hookUrl, active: 'yes' }, 'body.active'],
    ['unknown field', { url: hookUrl, name: 'x' }, 'body'],
  ])('refuses %s with 400 and creates nothing', async (_what, body, path) => {
    const before = await app.platform.db.sql`SELECT count(*)::int AS n FROM webhooks WHERE project_id = ${p.projectId}`;
    const res = await p.owner.request('POST', '/api/webhooks', { projectId: p.projectId, ...body });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('Bad Request');
    expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    const after = await app.platform.db.sql`SELECT count(*)::int AS n FROM webhooks WHERE project_id = ${p.projectId}`;
    expect(after[0].n).toBe(before[0].n);
  });

  it('answers 404 for an unknown id and 400 for a non-JSON body', async () => {
    expect((await p.owner.request('GET', '/api/webhooks/whk_nope')).status).toBe(404);
    const raw = await app.request('POST', '/api/webhooks', { cookie: p.owner.cookie, csrf: p.owner.csrf, rawBody: '{oops', headers: { 'content-type': 'application/json' } });
    expect(raw.status).toBe(400);
  });
});

describe('update and delete', () => {
  it('pauses with active:false keeping the configuration, and resumes', async () => {
    const hook = await createWebhook(p.owner, { projectId: p.projectId, url: hookUrl, events: ['flag.toggled'] });
    const paused = await p.owner.request('PATCH', `/api/webhooks/${hook.id}`, { active: false });
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ id: hook.id, active: false, url: hookUrl, events: ['flag.toggled'] });
    expect(paused.body).not.toHaveProperty('secret');
    const resumed = await p.owner.request('PATCH', `/api/webhooks/${hook.id}`, { active: true });
    expect(resumed.body.active).toBe(true);
  });

  it('changes url, events and secret (the secret stays write-only)', async () => {
    const hook = await createWebhook(p.owner, { projectId: p.projectId, url: hookUrl });
    const res = await p.owner.request('PATCH', `/api/webhooks/${hook.id}`, { url: 'http://127.0.0.1:10/new', events: ['flag.created'], secret: 'rotated-secret' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ url: 'http://127.0.0.1:10/new', events: ['flag.created'] });
    expect(res.text).not.toContain('rotated-secret');
    const [row] = await app.platform.db.sql`SELECT secret FROM webhooks WHERE id = ${hook.id}`;
    expect(row.secret).toBe('rotated-secret');
  });

  it.each([
    ['an empty patch', {}],
    ['an invalid url', { url: 'gopher://x' }],
    ['an unknown event', { events: ['nope'] }],
    ['an unknown field', { projectId: 'prj_x' }],
  ])('refuses %s with 400 and changes nothing', async (_what, body) => {
    const hook = await createWebhook(p.owner, { projectId: p.projectId, url: hookUrl, events: ['flag.deleted'] });
    const res = await p.owner.request('PATCH', `/api/webhooks/${hook.id}`, body);
    expect(res.status).toBe(400);
    const now = await p.owner.request('GET', `/api/webhooks/${hook.id}`);
    expect(now.body).toMatchObject({ url: hookUrl, events: ['flag.deleted'], active: true, updatedAt: now.body.createdAt });
  });

  it('deletes (204), then the webhook is gone (404)', async () => {
    const hook = await createWebhook(p.owner, { projectId: p.projectId, url: hookUrl });
    const del = await p.owner.request('DELETE', `/api/webhooks/${hook.id}`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await p.owner.request('GET', `/api/webhooks/${hook.id}`)).status).toBe(404);
    expect((await p.owner.request('PATCH', `/api/webhooks/${hook.id}`, { active: false })).status).toBe(404);
    expect((await p.owner.request('DELETE', `/api/webhooks/${hook.id}`)).status).toBe(404);
  });

  it('audits create, update and delete without the secret', async () => {
    const hook = await createWebhook(p.owner, { projectId: p.projectId, url: hookUrl, secret: 'audit-me-not' });
    await p.owner.request('PATCH', `/api/webhooks/${hook.id}`, { active: false, secret: 'still-not-audited' });
    await p.owner.request('DELETE', `/api/webhooks/${hook.id}`);
    const rows = await app.platform.db.sql<{ action: string; resource_type: string; user_id: string; changes: any; metadata: any }[]>`
      SELECT action, resource_type, user_id, changes, metadata, before::text AS b, after::text AS a FROM audit_logs
      WHERE resource_id = ${hook.id} ORDER BY timestamp`;
    expect(rows.map((r) => r.action)).toEqual(['webhook.create', 'webhook.update', 'webhook.delete']);
    expect(rows.every((r) => r.resource_type === 'webhook' && r.user_id === p.owner.id)).toBe(true);
    expect(rows[1].changes).toEqual(expect.arrayContaining([{ field: 'active', oldValue: true, newValue: false }]));
    expect(rows[1].metadata).toEqual({ secretChanged: true });
    expect(JSON.stringify(rows)).not.toMatch(/audit-me-not|still-not-audited/);
  });
});

describe('who may manage webhooks', () => {
  let hookId: string;
  beforeAll(async () => {
    hookId = (await createWebhook(p.owner, { projectId: p.projectId, url: hookUrl })).id;
  });

  const calls = (projectId: () => string, id: () => string) => [
    ['GET', () => `/api/webhooks${qs({ projectId: projectId() })}`, undefined],
    ['POST', () => '/api/webhooks', () => ({ projectId: projectId(), url: hookUrl })],
    ['GET', () => `/api/webhooks/${id()}`, undefined],
    ['PATCH', () => `/api/webhooks/${id()}`, () => ({ active: true })],
    ['GET', () => `/api/webhooks/${id()}/deliveries`, undefined],
    ['DELETE', () => `/api/webhooks/${id()}`, undefined],
  ] as const;

  it('lets the project admin do everything', async () => {
    const own = (await createWebhook(p.admin, { projectId: p.projectId, url: hookUrl })).id;
    for (const [method, path, body] of calls(() => p.projectId, () => own)) {
      const res = await p.admin.request(method, path(), body?.());
      expect([200, 201, 204]).toContain(res.status);
    }
  });

  it.each(['member', 'viewer'] as const)('refuses the %s role with 403 on every endpoint', async (role) => {
    for (const [method, path, body] of calls(() => p.projectId, () => hookId)) {
      const res = await p[role].request(method, path(), body?.());
      expect({ method, path: path(), status: res.status, message: res.body.message }).toEqual({
        method,
        path: path(),
        status: 403,
        message: "Forbidden: You need 'manage_settings' permission",
      });
    }
    expect((await p.owner.request('GET', `/api/webhooks/${hookId}`)).status).toBe(200);
  });

  it("answers 404 to another project's owner on every endpoint (no BOLA)", async () => {
    for (const [method, path, body] of calls(() => p.projectId, () => hookId)) {
      const res = await other.owner.request(method, path(), body?.());
      expect({ method, path: path(), status: res.status }).toEqual({ method, path: path(), status: 404 });
    }
    expect((await p.owner.request('GET', `/api/webhooks/${hookId}`)).body.active).toBe(true);
  });

  it('refuses anonymous callers with 401 and a session without CSRF with 403', async () => {
    for (const [method, path, body] of calls(() => p.projectId, () => hookId)) {
      expect((await app.request(method, path(), { body: body?.() })).status).toBe(401);
    }
    const noCsrf = await app.request('POST', '/api/webhooks', { cookie: p.owner.cookie, body: { projectId: p.projectId, url: hookUrl } });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body.message).toMatch(/CSRF/);
  });

  it('accepts a project token with manage_settings, refuses one without it and one of another project', async () => {
    const manager = await jwtToken(p.owner, p.projectId, ['manage_settings']);
    const created = await app.request('POST', '/api/webhooks', { token: manager, body: { projectId: p.projectId, url: hookUrl } });
    expect(created.status).toBe(201);
    expect((await app.request('GET', `/api/webhooks${qs({ projectId: p.projectId })}`, { token: manager })).status).toBe(200);
    expect((await app.request('PATCH', `/api/webhooks/${created.body.id}`, { token: manager, body: { active: false } })).status).toBe(200);

    const writer = await opaqueToken(p.owner, p.projectId, { read: true, write: true, delete: true });
    const refused = await app.request('POST', '/api/webhooks', { token: writer, body: { projectId: p.projectId, url: hookUrl } });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe("Forbidden: You need 'manage_settings' permission");
    expect((await app.request('GET', `/api/webhooks/${hookId}`, { token: writer })).status).toBe(403);

    const foreign = await jwtToken(other.owner, other.projectId, ['manage_settings']);
    expect((await app.request('GET', `/api/webhooks/${hookId}`, { token: foreign })).status).toBe(404);
    expect((await app.request('GET', `/api/webhooks${qs({ projectId: p.projectId })}`, { token: foreign })).status).toBe(404);
    expect((await app.request('POST', '/api/webhooks', { token: foreign, body: { projectId: p.projectId, url: hookUrl } })).status).toBe(404);
    expect((await app.request('DELETE', `/api/webhooks/${hookId}`, { token: foreign })).status).toBe(404);
  });

  it('accepts an admin-tier personal token of an owner, refuses the write and read tiers', async () => {
    const adminTier = await personalToken(p.owner, 'admin');
    expect((await app.request('POST', '/api/webhooks', { token: adminTier, body: { projectId: p.projectId, url: hookUrl } })).status).toBe(201);
    const writeTier = await personalToken(p.owner, 'write');
    const w = await app.request('POST', '/api/webhooks', { token: writeTier, body: { projectId: p.projectId, url: hookUrl } });
    expect(w.status).toBe(403);
    expect(w.body.message).toMatch(/^Forbidden: .*admin tier/);
    const readTier = await personalToken(p.owner, 'read');
    const r = await app.request('POST', '/api/webhooks', { token: readTier, body: { projectId: p.projectId, url: hookUrl } });
    expect(r.status).toBe(403);
    expect(r.body.message).toMatch(/read-only/);
    // A member's admin-tier token is still only a member.
    const memberAdminTier = await personalToken(p.member, 'admin');
    expect((await app.request('GET', `/api/webhooks${qs({ projectId: p.projectId })}`, { token: memberAdminTier })).status).toBe(403);
  });
});
