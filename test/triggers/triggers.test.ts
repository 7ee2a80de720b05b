import { createHash, randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { createLogger } from '../../api/infra/logger';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, createWebhook, expectStatus, opaqueToken, personalToken, qs, startReceiver, uniquePath, type Project, type Receiver } from '../webhooks/support';

/**
 * Flag triggers (docs/api-reference.md#triggers, docs/limits.md): creation, secrecy, listing,
 * revocation, execution, rate limit, access.
 */

const BASE = 'https://flags.example.com';
let app: TestApp;
let receiver: Receiver;
let p: Project;
let other: Project;
const logLines: string[] = [];
const logSink = new Writable({
  write(chunk, _enc, done) {
    logLines.push(chunk.toString());
    done();
  },
});

beforeAll(async () => {
  app = await startTestApp({ PUBLIC_BASE_URL: BASE }, { logger: createLogger('info', logSink) });
  receiver = await startReceiver();
  p = await createProject(app);
  other = await createProject(app);
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const newKey = (label: string) => `${label}-${randomBytes(3).toString('hex')}`;
const ref = (serviceId: string, environment = 'production') => qs({ serviceId, environment });
/** Executes a trigger URL exactly as an external system would: no credentials at all. */
const execute = (url: string) => app.request('POST', new URL(url).pathname);

async function flagState(key: string, serviceId = p.serviceId) {
  const res = await p.owner.request('GET', `/api/flags/${key}${ref(serviceId)}`);
  expectStatus(res, 200, 'get flag');
  return res.body as { enabled: boolean; version: number };
}

async function createTrigger(key: string, action: string, name = `${action} hook`) {
  const res = await p.owner.request('POST', `/api/flags/${key}/triggers`, { serviceId: p.serviceId, environment: 'production', action, name });
  expectStatus(res, 201, 'create trigger');
  return res.body as { id: string; url: string; token: string; name: string };
}

describe('creating a trigger', () => {
  it('returns the URL and raw token once and stores only the SHA-256 of the token', async () => {
    const key = newKey('create');
    await createFlag(p.owner, p.serviceId, key);
    const res = await p.owner.request('POST', `/api/flags/${key}/triggers`, { serviceId: p.serviceId, environment: 'production', action: 'enable', name: 'Datadog recovery' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^trg_/),
      name: 'Datadog recovery',
      action: 'enable',
      flagKey: key,
      serviceId: p.serviceId,
      environment: 'production',
      projectId: p.projectId,
      createdBy: p.owner.id,
      createdAt: expect.any(String),
      lastExecutedAt: null,
      executionCount: 0,
      revokedAt: null,
      url: expect.any(String),
      token: expect.stringMatching(/^fgt_[A-Za-z0-9_-]{43}$/),
    });
    expect(res.body.url).toBe(`${BASE}/api/triggers/${res.body.token}`);

    const rows = await app.platform.db.sql`SELECT * FROM flag_triggers WHERE id = ${res.body.id}`;
    expect(rows[0].token_hash).toBe(sha256(res.body.token));
    expect(JSON.stringify(rows)).not.toContain(res.body.token);

    const list = await p.owner.request('GET', `/api/flags/${key}/triggers${qs({ serviceId: p.serviceId })}`);
    expect(list.status).toBe(200);
    expect(list.body.triggers).toHaveLength(1);
    expect(list.body.triggers[0]).not.toHaveProperty('token');
    expect(list.body.triggers[0]).not.toHaveProperty('url');
    expect(list.text).not.toContain(res.body.token);
    expect(list.text).not.toContain(rows[0].token_hash);

    const audit = await app.platform.db.sql`SELECT action, actor, after::text AS after FROM audit_logs WHERE resource_id = ${res.body.id}`;
    expect(audit).toEqual([{ action: 'trigger.create', actor: p.owner.email, after: expect.any(String) }]);
    expect(audit[0].after).not.toContain(res.body.token);
  });

  it('accepts a project token with write permission (bearer, no CSRF)', async () => {
    const key = newKey('bearer');
    await createFlag(p.owner, p.serviceId, key);
    const token = await opaqueToken(p.owner, p.projectId, { read: true, write: true });
    const res = await app.request('POST', `/api/flags/${key}/triggers`, { token, body: { serviceId: p.serviceId, environment: 'production', action: 'toggle', name: 'ci' } });
    expect(res.status).toBe(201);
    expect(res.body.createdBy).toBe(p.owner.id);
  });

  it('defaults the environment to development like the other per-flag routes', async () => {
    const key = newKey('default-env');
    expectStatus(await p.owner.request('POST', '/api/flags', { key, serviceId: p.serviceId, type: 'boolean' }), 201, 'create flag everywhere');
    const res = await p.owner.request('POST', `/api/flags/${key}/triggers`, { serviceId: p.serviceId, action: 'enable', name: 'dev' });
    expect(res.status).toBe(201);
    expect(res.body.environment).toBe('development');
  });

  it.each([
    ['missing action', { name: 'x' }, 'body.action'],
    ['unknown action', { name: 'x', action: 'explode' }, 'body.action'],
    ['missing name', { action: 'enable' }, 'body.name'],
    ['blank name', { action: 'enable', name: '   ' }, 'body.name'],
    ['unknown environment', { action: 'enable', name: 'x', environment: 'qa' }, 'body.environment'],
    ['unknown field', { action: 'enable', name: 'x', token: 'mine' }, 'body'],
    ['missing serviceId', { action: 'enable', name: 'x', serviceId: undefined }, 'body.serviceId'],
  ])('refuses %s with 400 and creates nothing', async (_what, body, path) => {
    const key = newKey('invalid');
    await createFlag(p.owner, p.serviceId, key);
    const res = await p.owner.request('POST', `/api/flags/${key}/triggers`, { serviceId: p.serviceId, environment: 'production', ...body });
    expect(res.status).toBe(400);
    expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    const rows = await app.platform.db.sql`SELECT 1 FROM flag_triggers WHERE flag_key = ${key}`;
    expect(rows).toHaveLength(0);
  });

  it('answers 404 for an unknown flag or service', async () => {
    const unknownFlag = await p.owner.request('POST', '/api/flags/no-such-flag/triggers', { serviceId: p.serviceId, environment: 'production', action: 'enable', name: 'x' });
    expect(unknownFlag.status).toBe(404);
    const unknownService = await p.owner.request('POST', '/api/flags/x/triggers', { serviceId: 'svc_nope', environment: 'production', action: 'enable', name: 'x' });
    expect(unknownService.status).toBe(404);
  });
});

describe('who may manage triggers', () => {
  let key: string;
  let triggerId: string;
  beforeAll(async () => {
    key = newKey('access');
    await createFlag(p.owner, p.serviceId, key);
    triggerId = (await createTrigger(key, 'toggle')).id;
  });
  const createBody = () => ({ serviceId: p.serviceId, environment: 'production', action: 'enable', name: 'x' });

  it('lets members create and revoke, viewers only list', async () => {
    const created = await p.member.request('POST', `/api/flags/${key}/triggers`, createBody());
    expect(created.status).toBe(201);
    expect((await p.viewer.request('GET', `/api/flags/${key}/triggers${qs({ serviceId: p.serviceId })}`)).status).toBe(200);
    const viewerCreate = await p.viewer.request('POST', `/api/flags/${key}/triggers`, createBody());
    expect(viewerCreate.status).toBe(403);
    expect(viewerCreate.body.message).toBe("Forbidden: You need 'write' permission");
    const viewerDelete = await p.viewer.request('DELETE', `/api/flags/${key}/triggers/${created.body.id}${qs({ serviceId: p.serviceId })}`);
    expect(viewerDelete.status).toBe(403);
    expect((await p.member.request('DELETE', `/api/flags/${key}/triggers/${created.body.id}${qs({ serviceId: p.serviceId })}`)).status).toBe(204);
  });

  it('refuses personal access tokens of every tier on create, even an owner\'s admin token', async () => {
    for (const tier of ['read', 'write', 'admin'] as const) {
      const pat = await personalToken(p.owner, tier);
      const res = await app.request('POST', `/api/flags/${key}/triggers`, { token: pat, body: createBody() });
      expect(res.status).toBe(403);
      expect(res.body.message).toMatch(/^Forbidden: personal tokens cannot do this/);
    }
    const writer = await personalToken(p.owner, 'write');
    expect((await app.request('GET', `/api/flags/${key}/triggers${qs({ serviceId: p.serviceId })}`, { token: writer })).status).toBe(200);
  });

  it('refuses a read-only project token on create and revoke', async () => {
    const reader = await opaqueToken(p.owner, p.projectId, { read: true });
    expect((await app.request('POST', `/api/flags/${key}/triggers`, { token: reader, body: createBody() })).status).toBe(403);
    expect((await app.request('DELETE', `/api/flags/${key}/triggers/${triggerId}${qs({ serviceId: p.serviceId })}`, { token: reader })).status).toBe(403);
    expect((await app.request('GET', `/api/flags/${key}/triggers${qs({ serviceId: p.serviceId })}`, { token: reader })).status).toBe(200);
  });

  it("answers 404 to another project's users and tokens (no BOLA)", async () => {
    const foreignToken = await opaqueToken(other.owner, other.projectId, { read: true, write: true, delete: true });
    for (const call of [
      (o: Record<string, unknown>) => app.request('POST', `/api/flags/${key}/triggers`, { ...o, body: createBody() }),
      (o: Record<string, unknown>) => app.request('GET', `/api/flags/${key}/triggers${qs({ serviceId: p.serviceId })}`, o),
      (o: Record<string, unknown>) => app.request('GET', `/api/triggers${qs({ serviceId: p.serviceId })}`, o),
      (o: Record<string, unknown>) => app.request('DELETE', `/api/flags/${key}/triggers/${triggerId}${qs({ serviceId: p.serviceId })}`, o),
    ]) {
      expect((await call({ cookie: other.owner.cookie, csrf: other.owner.csrf })).status).toBe(404);
      expect((await call({ token: foreignToken })).status).toBe(404);
    }
    // Their own service with this trigger id: still not found.
    expect((await other.owner.request('DELETE', `/api/flags/${key}/triggers/${triggerId}${qs({ serviceId: other.serviceId })}`)).status).toBe(404);
    const list = await p.owner.request('GET', `/api/flags/${key}/triggers${qs({ serviceId: p.serviceId })}`);
    expect(list.body.triggers.map((t: { id: string }) => t.id)).toContain(triggerId);
  });

  it('refuses anonymous management with 401 and a cookie session without CSRF with 403', async () => {
    expect((await app.request('POST', `/api/flags/${key}/triggers`, { body: createBody() })).status).toBe(401);
    expect((await app.request('GET', `/api/flags/${key}/triggers${qs({ serviceId: p.serviceId })}`)).status).toBe(401);
    expect((await app.request('GET', `/api/triggers${qs({ serviceId: p.serviceId })}`)).status).toBe(401);
    expect((await app.request('DELETE', `/api/flags/${key}/triggers/${triggerId}${qs({ serviceId: p.serviceId })}`)).status).toBe(401);
    const noCsrf = await app.request('POST', `/api/flags/${key}/triggers`, { cookie: p.owner.cookie, body: createBody() });
    expect(noCsrf.status).toBe(403);
  });
});

describe("listing a service's triggers across its flags", () => {
  it('lists the active triggers of every flag, by flag key, never their tokens; viewers may; limit pages', async () => {
    // The other project's service has no triggers from the tests above.
    const [first, second] = [newKey('b-listed'), newKey('a-listed')];
    await createFlag(other.owner, other.serviceId, first);
    await createFlag(other.owner, other.serviceId, second);
    const made: Record<string, string> = {};
    for (const [key, name] of [[first, 'first'], [second, 'second'], [second, 'revoked']]) {
      const res = await other.owner.request('POST', `/api/flags/${key}/triggers`, { serviceId: other.serviceId, environment: 'production', action: 'disable', name });
      expectStatus(res, 201, 'create trigger');
      made[name] = res.body.id;
    }
    expectStatus(await other.owner.request('DELETE', `/api/flags/${second}/triggers/${made.revoked}${qs({ serviceId: other.serviceId })}`), 204, 'revoke');

    const listed = await other.viewer.request('GET', `/api/triggers${qs({ serviceId: other.serviceId })}`);
    expect(listed.status).toBe(200);
    expect(listed.body.hasMore).toBe(false);
    expect(listed.body.triggers.map((t: { flagKey: string; name: string }) => [t.flagKey, t.name])).toEqual([
      [second, 'second'],
      [first, 'first'],
    ]);
    expect(JSON.stringify(listed.body)).not.toMatch(/token|\/api\/triggers\//);

    const page = await other.owner.request('GET', `/api/triggers${qs({ serviceId: other.serviceId, limit: '1' })}`);
    expect(page.body).toMatchObject({ hasMore: true, triggers: [{ flagKey: second, name: 'second' }] });
  });
});

describe('executing a trigger', () => {
  it('enables, disables and toggles through the flag mutation path: version, audit as trigger:<name>, outbox event, webhook', async () => {
    const key = newKey('exec');
    await createFlag(p.owner, p.serviceId, key);
    const path = uniquePath('trigger-events');
    const webhook = await createWebhook(p.owner, { projectId: p.projectId, url: receiver.url(path), events: ['flag.toggled'] });
    receiver.expectSecret(path, webhook.secret);

    const enable = await createTrigger(key, 'enable', 'pagerduty-resolved');
    const disable = await createTrigger(key, 'disable', 'kill-switch');
    const toggle = await createTrigger(key, 'toggle', 'flipper');
    const v0 = (await flagState(key)).version;

    const on = await execute(enable.url);
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ success: true, triggerId: enable.id, action: 'enable', changed: true, flag: { key, serviceId: p.serviceId, environment: 'production', enabled: true, version: v0 + 1 } });
    expect(await flagState(key)).toMatchObject({ enabled: true, version: v0 + 1 });

    const again = await execute(enable.url);
    expect(again.body).toMatchObject({ changed: false, flag: { enabled: true, version: v0 + 1 } });

    expect((await execute(disable.url)).body).toMatchObject({ changed: true, flag: { enabled: false, version: v0 + 2 } });
    expect((await execute(toggle.url)).body).toMatchObject({ changed: true, flag: { enabled: true, version: v0 + 3 } });
    expect((await execute(toggle.url)).body).toMatchObject({ changed: true, flag: { enabled: false, version: v0 + 4 } });

    const history = await p.owner.request('GET', `/api/flags/${key}/history${ref(p.serviceId)}`);
    expect(history.body.versions.slice(0, 4).map((v: { actor: string; changeType: string }) => [v.changeType, v.actor])).toEqual([
      ['toggle', 'trigger:flipper'],
      ['toggle', 'trigger:flipper'],
      ['toggle', 'trigger:kill-switch'],
      ['toggle', 'trigger:pagerduty-resolved'],
    ]);

    const audit = await app.platform.db.sql<{ actor: string; user_id: string | null; metadata: any }[]>`
      SELECT actor, user_id, metadata FROM audit_logs WHERE project_id = ${p.projectId} AND action = 'flag.toggle' AND resource_name = ${key}
      ORDER BY timestamp`;
    expect(audit.map((a) => a.actor)).toEqual(['trigger:pagerduty-resolved', 'trigger:kill-switch', 'trigger:flipper', 'trigger:flipper']);
    expect(audit[0].user_id).toBeNull();
    expect(audit[0].metadata).toMatchObject({ triggerId: enable.id, triggerName: 'pagerduty-resolved', triggerAction: 'enable' });

    const outbox = await app.platform.db.sql<{ event: string; payload: any }[]>`
      SELECT event, payload FROM flag_outbox WHERE flag_key = ${key} AND event = 'flag.toggled' ORDER BY seq`;
    expect(outbox.map((o) => o.payload.actor)).toEqual(['trigger:pagerduty-resolved', 'trigger:kill-switch', 'trigger:flipper', 'trigger:flipper']);

    await eventually(async () => receiver.received(path).length === 4, 20_000);
    expect(receiver.received(path).map((d) => d.body.data.changes.enabled.to).sort()).toEqual([false, false, true, true]);
    expect(receiver.received(path).every((d) => d.svcSignatureValid)).toBe(true);

    const listed = await p.owner.request('GET', `/api/flags/${key}/triggers${qs({ serviceId: p.serviceId, environment: 'production' })}`);
    const byId = Object.fromEntries(listed.body.triggers.map((t: { id: string }) => [t.id, t]));
    expect(byId[enable.id]).toMatchObject({ executionCount: 2, lastExecutedAt: expect.any(String) });
    expect(byId[toggle.id].executionCount).toBe(2);
  });

  it('needs no headers at all and ignores a body and a session cookie', async () => {
    const key = newKey('noauth');
    await createFlag(p.owner, p.serviceId, key);
    const t = await createTrigger(key, 'enable');
    const withBody = await app.request('POST', new URL(t.url).pathname, { body: { anything: 'datadog payload' } });
    expect(withBody.status).toBe(200);
    const withCookie = await app.request('POST', new URL(t.url).pathname, { cookie: p.viewer.cookie });
    expect(withCookie.status).toBe(200);
  });

  it('keeps the token out of the request logs', async () => {
    const key = newKey('logs');
    await createFlag(p.owner, p.serviceId, key);
    const t = await createTrigger(key, 'enable');
    expect((await execute(t.url)).status).toBe(200);
    const logs = logLines.join('');
    expect(logs).toContain('/api/triggers/[redacted]');
    expect(logs).not.toContain(t.token);
    expect(logs).not.toContain(t.token.slice(4));
  });

  it('answers 404 for unknown, malformed and revoked tokens', async () => {
    expect((await app.request('POST', `/api/triggers/fgt_${randomBytes(32).toString('base64url')}`)).status).toBe(404);
    const malformed = await app.request('POST', '/api/triggers/not-a-token');
    expect(malformed.status).toBe(404);
    expect(malformed.body).toEqual({ error: 'Not Found', message: 'Trigger not found' });

    const key = newKey('revoke');
    await createFlag(p.owner, p.serviceId, key);
    const t = await createTrigger(key, 'toggle');
    expect((await execute(t.url)).status).toBe(200);
    const del = await p.owner.request('DELETE', `/api/flags/${key}/triggers/${t.id}${qs({ serviceId: p.serviceId })}`);
    expect(del.status).toBe(204);
    const before = await flagState(key);
    expect((await execute(t.url)).status).toBe(404);
    expect(await flagState(key)).toEqual(before);
    expect((await p.owner.request('DELETE', `/api/flags/${key}/triggers/${t.id}${qs({ serviceId: p.serviceId })}`)).status).toBe(404);
    const list = await p.owner.request('GET', `/api/flags/${key}/triggers${qs({ serviceId: p.serviceId })}`);
    expect(list.body.triggers).toEqual([]);
    const [row] = await app.platform.db.sql`SELECT revoked_at FROM flag_triggers WHERE id = ${t.id}`;
    expect(row.revoked_at).toBeInstanceOf(Date);
    const audit = await app.platform.db.sql`SELECT action FROM audit_logs WHERE resource_id = ${t.id} ORDER BY timestamp`;
    expect(audit.map((a) => a.action)).toEqual(['trigger.create', 'trigger.revoke']);
  });

  it('stops working when its flag is deleted', async () => {
    const key = newKey('gone');
    await createFlag(p.owner, p.serviceId, key);
    const t = await createTrigger(key, 'toggle');
    expectStatus(await p.owner.request('DELETE', `/api/flags/${key}${ref(p.serviceId)}`), 204, 'delete flag');
    expect((await execute(t.url)).status).toBe(404);
  });

  it('allows 30 executions per minute per token, then 429; other tokens are unaffected', async () => {
    const key = newKey('rate');
    await createFlag(p.owner, p.serviceId, key);
    const limited = await createTrigger(key, 'enable', 'noisy');
    const fresh = await createTrigger(key, 'enable', 'quiet');
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) statuses.push((await execute(limited.url)).status);
    expect(statuses).toEqual(Array(30).fill(200));
    const over = await execute(limited.url);
    expect(over.status).toBe(429);
    expect(over.body.error).toBe('Too Many Requests');
    expect(over.headers.get('ratelimit-limit')).toBe('30');
    expect(over.headers.get('ratelimit-remaining')).toBe('0');
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await execute(fresh.url)).status).toBe(200);
    const [row] = await app.platform.db.sql`SELECT execution_count FROM flag_triggers WHERE id = ${limited.id}`;
    expect(row.execution_count).toBe(30);
  });
});
