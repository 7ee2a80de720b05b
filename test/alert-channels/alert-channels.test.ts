import { randomBytes } from 'node:crypto';
import { SendThrottle } from '../../api/features/accounts/throttle';
import { AlertChannelService } from '../../api/features/alert-channels/service';
import { AlertChannelStore } from '../../api/features/alert-channels/store';
import type { OrgAlert } from '../../api/features/alert-channels/types';
import { MailQueue } from '../../api/lib/mail/mail-queue';
import { DeliveryQueue, DeliveryStore } from '../../api/features/webhooks/deliveries';
import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';
import { expectStatus, opaqueToken, personalToken, startReceiver, uniquePath, type Receiver } from '../webhooks/support';

/**
 * Organization alert channels (docs/api-reference.md#organizations): CRUD, test send per type,
 * delivery, roles and isolation.
 */

let app: TestApp;
let receiver: Receiver;
let owner: TestUser;
let admin: TestUser;
let member: TestUser;
let outsider: TestUser;
let orgId: string;
let otherOrgId: string;

beforeAll(async () => {
  app = await startTestApp();
  receiver = await startReceiver();
  owner = await app.signup({ verified: true });
  admin = await app.signup({ verified: true });
  member = await app.signup({ verified: true });
  outsider = await app.signup({ verified: true });
  const org = await owner.request('POST', '/api/orgs', { name: 'Acme' });
  expectStatus(org, 201, 'create org');
  orgId = org.body.id;
  // There is no org-membership API yet: add the other roles directly.
  await app.platform.db.sql`INSERT INTO org_members (org_id, user_id, role) VALUES (${orgId}, ${admin.id}, 'admin'), (${orgId}, ${member.id}, 'member')`;
  otherOrgId = (await outsider.request('POST', '/api/orgs', { name: 'Other' })).body.id;
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const base = () => `/api/orgs/${orgId}/alert-channels`;

/** E-mail recipients are mailed only once they confirmed (test/security/outbound-mail.test.ts). */
async function confirmRecipient(to: string) {
  const mail = await eventually(async () => (await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(to)}`)).body.messages?.find((m: { subject: string }) => /^Confirm/.test(m.subject)));
  expectStatus(await app.request('POST', '/api/alert-channels/recipients/confirm', { body: { token: mail.token } }), 200, 'confirm recipient');
}

async function createChannel(user: TestUser, body: Record<string, unknown>, org = orgId) {
  const res = await user.request('POST', `/api/orgs/${org}/alert-channels`, body);
  expectStatus(res, 201, 'create channel');
  return res.body;
}

describe('creating and listing channels', () => {
  it('creates one channel of each type, shows them to every org member, and never returns secrets after creation', async () => {
    const chat = await createChannel(owner, { type: 'chat', name: 'Ops chat', url: receiver.url('/services/T000/B000/XXXXsecretXXXX') });
    expect(chat).toEqual({
      id: expect.stringMatching(/^alc_/),
      orgId,
      name: 'Ops chat',
      type: 'chat',
      enabled: true,
      destination: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/…XXXX$/),
      createdBy: owner.id,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    const paging = await createChannel(admin, { type: 'paging', name: 'On call', routingKey: 'R0UTINGKEY1234567890abcd', url: receiver.url('/pd') });
    expect(paging.destination).toMatch(/^127\.0\.0\.1:\d+ \(routing key …abcd\)$/);
    const email = await createChannel(owner, { type: 'email', name: 'Leads', recipients: ['Lead@Example.com', 'cto@example.com', 'lead@example.com'] });
    expect(email.destination).toBe('lead@example.com, cto@example.com');
    const hook = await createChannel(owner, { type: 'webhook', name: 'Incident bot', url: receiver.url('/bot') });
    expect(hook.secret).toMatch(/^whsec_/);
    expect(hook.destination).toBe(receiver.url('/bot'));

    for (const viewer of [owner, admin, member]) {
      const list = await viewer.request('GET', base());
      expect(list.status).toBe(200);
      expect(list.body.channels.map((c: { id: string }) => c.id)).toEqual(expect.arrayContaining([chat.id, paging.id, email.id, hook.id]));
      expect(list.text).not.toMatch(/XXXXsecretXXXX|R0UTINGKEY|whsec_/);
      expect(list.body.channels.every((c: Record<string, unknown>) => !('secret' in c) && !('config' in c))).toBe(true);
    }
  });

  it.each([
    ['an unknown type', { type: 'sms', name: 'x', url: 'http://127.0.0.1:1/' }, 'body.type'],
    ['chat without url', { type: 'chat', name: 'x' }, 'body.url'],
    ['paging without routing key', { type: 'paging', name: 'x' }, 'body.routingKey'],
    ['an invalid e-mail', { type: 'email', name: 'x', recipients: ['not-an-email'] }, 'body.recipients.0'],
    ['no recipients', { type: 'email', name: 'x', recipients: [] }, 'body.recipients'],
    ['21 recipients', { type: 'email', name: 'x', recipients: Array.from({ length: 21 }, (_, i) => `r${i}@example.com`) }, 'body.recipients'],
    ['a missing name', { type: 'chat', url: 'http://127.0.0.1:1/' }, 'body.name'],
    ['an ftp url', { type: 'webhook', name: 'x', url: 'ftp://127.0.0.1/' }, 'body.url'],
    ['a field of another type', { type: 'chat', name: 'x', url: 'http://127.0.0.1:1/', recipients: ['a@example.com'] }, 'body'],
  ])('refuses %s with 400 and creates nothing', async (_what, body, path) => {
    const before = await app.platform.db.sql`SELECT count(*)::int AS n FROM alert_channels WHERE org_id = ${orgId}`;
    const res = await owner.request('POST', base(), body);
    expect(res.status).toBe(400);
    expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    const after = await app.platform.db.sql`SELECT count(*)::int AS n FROM alert_channels WHERE org_id = ${orgId}`;
    expect(after[0].n).toBe(before[0].n);
  });

  it('deletes a channel (204), then it is gone (404)', async () => {
    const c = await createChannel(owner, { type: 'chat', name: 'temp', url: receiver.url('/temp') });
    expect((await admin.request('DELETE', `${base()}/${c.id}`)).status).toBe(204);
    expect((await owner.request('DELETE', `${base()}/${c.id}`)).status).toBe(404);
    expect((await owner.request('POST', `${base()}/${c.id}/test`)).status).toBe(404);
    const list = await owner.request('GET', base());
    expect(list.body.channels.map((x: { id: string }) => x.id)).not.toContain(c.id);
  });
});

describe('who may manage channels', () => {
  let channelId: string;
  beforeAll(async () => {
    channelId = (await createChannel(owner, { type: 'chat', name: 'guarded', url: receiver.url(uniquePath('guarded')) })).id;
  });
  const body = () => ({ type: 'chat', name: 'x', url: receiver.url('/x') });

  it('refuses org members without owner/admin role on create, delete and test', async () => {
    for (const [method, path, payload] of [
      ['POST', base(), body()],
      ['DELETE', `${base()}/${channelId}`, undefined],
      ['POST', `${base()}/${channelId}/test`, undefined],
    ] as const) {
      const res = await member.request(method, path, payload);
      expect(res.status).toBe(403);
      expect(res.body.message).toBe('Forbidden: managing alert channels needs the owner or admin role in the organization');
    }
  });

  it('answers 404 to users outside the organization, and for a channel of another organization (no BOLA)', async () => {
    for (const [method, path, payload] of [
      ['GET', base(), undefined],
      ['POST', base(), body()],
      ['DELETE', `${base()}/${channelId}`, undefined],
      ['POST', `${base()}/${channelId}/test`, undefined],
    ] as const) {
      expect((await outsider.request(method, path, payload)).status).toBe(404);
    }
    // The outsider's own org in the path, this org's channel id.
    expect((await outsider.request('DELETE', `/api/orgs/${otherOrgId}/alert-channels/${channelId}`)).status).toBe(404);
    expect((await outsider.request('POST', `/api/orgs/${otherOrgId}/alert-channels/${channelId}/test`)).status).toBe(404);
    expect((await owner.request('GET', base())).body.channels.map((c: { id: string }) => c.id)).toContain(channelId);
  });

  it('refuses anonymous callers (401), project API tokens (403) and a session without CSRF (403)', async () => {
    expect((await app.request('GET', base())).status).toBe(401);
    expect((await app.request('POST', base(), { body: body() })).status).toBe(401);
    const project = await owner.request('POST', '/api/projects', { name: `p-${randomBytes(3).toString('hex')}`, orgId });
    const token = await opaqueToken(owner, project.body.id, { read: true, write: true, delete: true });
    const tokenRes = await app.request('GET', base(), { token });
    expect(tokenRes.status).toBe(403);
    expect((await app.request('POST', base(), { token, body: body() })).status).toBe(403);
    const noCsrf = await app.request('POST', base(), { cookie: owner.cookie, body: body() });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body.message).toMatch(/CSRF/);
  });

  it('lets a write-tier personal token of an owner manage channels, and a read-tier one only list', async () => {
    const writer = await personalToken(owner, 'write');
    const created = await app.request('POST', base(), { token: writer, body: body() });
    expect(created.status).toBe(201);
    expect((await app.request('DELETE', `${base()}/${created.body.id}`, { token: writer })).status).toBe(204);
    const reader = await personalToken(owner, 'read');
    expect((await app.request('GET', base(), { token: reader })).status).toBe(200);
    const refused = await app.request('POST', base(), { token: reader, body: body() });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/read-only/);
    // A member's write token is still only a member.
    const memberWriter = await personalToken(member, 'write');
    expect((await app.request('POST', base(), { token: memberWriter, body: body() })).status).toBe(403);
  });
});

describe('test sends', () => {
  it('posts a Slack-style {text} to a chat channel and reports the answer', async () => {
    const path = uniquePath('chat');
    const c = await createChannel(owner, { type: 'chat', name: 'Chat', url: receiver.url(path) });
    const res = await owner.request('POST', `${base()}/${c.id}/test`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true, status: 'delivered', deliveryId: expect.any(String), statusCode: 200, error: null, durationMs: expect.any(Number) });
    const [got] = receiver.received(path);
    expect(Object.keys(got.body)).toEqual(['text']);
    expect(got.body.text).toMatch(/^\*\[INFO\] Test alert for channel "Chat"\*\n/);
    expect(got.headers['content-type']).toBe('application/json');
  });

  it('posts a PagerDuty Events v2 trigger to a paging channel', async () => {
    const path = uniquePath('pd');
    const c = await createChannel(owner, { type: 'paging', name: 'PD', routingKey: 'routing-key-0123456789', url: receiver.url(path) });
    const res = await admin.request('POST', `${base()}/${c.id}/test`);
    expect(res.body).toMatchObject({ ok: true, status: 'delivered', statusCode: 200 });
    const [got] = receiver.received(path);
    expect(got.body).toEqual({
      routing_key: 'routing-key-0123456789',
      event_action: 'trigger',
      dedup_key: expect.stringMatching(/^alt_/),
      payload: {
        summary: expect.stringContaining('Test alert for channel "PD"'),
        source: 'feature-flag-service',
        severity: 'info',
        timestamp: expect.any(String),
        class: 'alert.test',
        custom_details: {},
      },
    });
  });

  it('signs a generic webhook test with the secret shown at creation', async () => {
    const path = uniquePath('bot');
    const c = await createChannel(owner, { type: 'webhook', name: 'Bot', url: receiver.url(path), secret: 'channel-secret' });
    expect(c.secret).toBe('channel-secret');
    receiver.expectSecret(path, 'channel-secret');
    expect((await owner.request('POST', `${base()}/${c.id}/test`)).body.ok).toBe(true);
    const [got] = receiver.received(path);
    expect(got.svcSignatureValid).toBe(true);
    expect(got.standardSignatureValid).toBe(true);
    expect(got.body).toMatchObject({ event: 'alert.test', timestamp: expect.any(String), data: { kind: 'alert.test', severity: 'info' } });
  });

  it('reports a failing destination after a single attempt', async () => {
    const path = uniquePath('broken');
    receiver.behave(path, () => ({ status: 500, body: 'upstream broke' }));
    const c = await createChannel(owner, { type: 'chat', name: 'Broken', url: receiver.url(path) });
    const res = await owner.request('POST', `${base()}/${c.id}/test`);
    expect(res.body).toMatchObject({ ok: false, status: 'failed', statusCode: 500, error: 'HTTP 500: upstream broke' });
    await new Promise((r) => setTimeout(r, 1500));
    expect(receiver.received(path)).toHaveLength(1);
  });

  it('queues an e-mail test through the mailer', async () => {
    const to = `oncall-${randomBytes(3).toString('hex')}@example.com`;
    const c = await createChannel(owner, { type: 'email', name: 'Mail', recipients: [to] });
    await confirmRecipient(to);
    const res = await owner.request('POST', `${base()}/${c.id}/test`);
    expect(res.body).toEqual({ ok: true, status: 'queued', deliveryId: null, statusCode: null, error: null, durationMs: null });
    const mail = await eventually(async () => (await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(to)}`)).body.messages?.find((m: { subject: string }) => !/^Confirm/.test(m.subject)));
    expect(mail.subject).toBe('[INFO] Test alert for channel "Mail"');
  });
});

describe('notifyOrgAlertChannels (called by release safety)', () => {
  it('notifies every enabled channel of the organization once per alert, with retries', async () => {
    const { sql } = app.platform.db;
    const service = new AlertChannelService({
      sql,
      store: new AlertChannelStore(),
      queue: new DeliveryQueue(app.platform.temporal, sql, new DeliveryStore()),
      mail: new MailQueue({ temporal: app.platform.temporal, sql: app.platform.db.sql, logger: app.platform.logger }),
      outbound: app.platform.outbound,
      sends: new SendThrottle(app.platform.cache, { perUser: 100, perRecipient: 100, windowSeconds: 60 }),
      publicBaseUrl: 'http://127.0.0.1',
      logger: app.platform.logger,
    });
    const org = (await owner.request('POST', '/api/orgs', { name: `Notify ${randomBytes(2).toString('hex')}` })).body.id;
    const chatPath = uniquePath('n-chat');
    const pdPath = uniquePath('n-pd');
    const hookPath = uniquePath('n-hook');
    const offPath = uniquePath('n-off');
    receiver.behave(chatPath, (n) => ({ status: n === 1 ? 503 : 200 }));
    const to = `alerts-${randomBytes(3).toString('hex')}@example.com`;
    const chat = await createChannel(owner, { type: 'chat', name: 'chat', url: receiver.url(chatPath) }, org);
    const pd = await createChannel(owner, { type: 'paging', name: 'pd', routingKey: 'rk-000000000000', url: receiver.url(pdPath) }, org);
    const hook = await createChannel(owner, { type: 'webhook', name: 'hook', url: receiver.url(hookPath) }, org);
    const unconfirmed = `unconfirmed-${randomBytes(3).toString('hex')}@example.com`;
    const mail = await createChannel(owner, { type: 'email', name: 'mail', recipients: [to, unconfirmed] }, org);
    await confirmRecipient(to);
    await createChannel(owner, { type: 'chat', name: 'off', url: receiver.url(offPath), enabled: false }, org);
    receiver.expectSecret(hookPath, hook.secret);

    const alert: OrgAlert = {
      id: `alt_${randomBytes(6).toString('hex')}`,
      kind: 'guardrail.rollback',
      title: 'Guardrail tripped: checkout-v2 rolled back',
      summary: 'Error rate rose by 4.1 points over control; rolled back to version 7.',
      severity: 'critical',
      timestamp: new Date().toISOString(),
      projectId: 'prj_x',
      serviceId: 'svc_x',
      environment: 'production',
      flagKey: 'checkout-v2',
      details: { errorRateDelta: 0.041, targetVersion: 7 },
    };
    const notified = await service.notifyOrgAlertChannels(org, alert);
    expect(notified).toEqual([
      { id: chat.id, name: 'chat', type: 'chat' },
      { id: pd.id, name: 'pd', type: 'paging' },
      { id: hook.id, name: 'hook', type: 'webhook' },
      { id: mail.id, name: 'mail', type: 'email' },
    ]);
    await service.notifyOrgAlertChannels(org, alert); // a repeat (e.g. a retried rollback) delivers nothing new

    await eventually(async () => receiver.received(chatPath).length === 2 && receiver.received(pdPath).length === 1 && receiver.received(hookPath).length === 1, 20_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(receiver.received(chatPath)).toHaveLength(2); // 503, then delivered on the retry
    expect(receiver.received(chatPath)[1].body.text).toMatch(/^\*\[CRITICAL\] Guardrail tripped: checkout-v2 rolled back\*\n.*\nflag checkout-v2, service svc_x, environment production, project prj_x\nerrorRateDelta: 0\.041/s);
    expect(receiver.received(pdPath)).toHaveLength(1);
    expect(receiver.received(pdPath)[0].body).toMatchObject({
      routing_key: 'rk-000000000000',
      dedup_key: alert.id,
      payload: { severity: 'critical', source: 'flag:checkout-v2', component: 'svc_x', group: 'prj_x', class: 'guardrail.rollback', custom_details: { errorRateDelta: 0.041, targetVersion: 7 } },
    });
    expect(receiver.received(hookPath)[0]).toMatchObject({ svcSignatureValid: true, standardSignatureValid: true, body: { event: 'alert.triggered', data: alert } });
    expect(receiver.received(offPath)).toEqual([]);
    const alertMails = async () =>
      ((await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(to)}`)).body.messages ?? []).filter((m: { subject: string }) => !/^Confirm/.test(m.subject));
    const mails = await eventually(async () => (await alertMails()).length > 0 && alertMails());
    expect(mails).toHaveLength(1);
    expect(mails[0].subject).toBe('[CRITICAL] Guardrail tripped: checkout-v2 rolled back');
    // The address that never confirmed got its confirmation request and nothing else.
    const unconfirmedMail = await eventually(async () => {
      const messages = (await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(unconfirmed)}`)).body.messages;
      return messages?.length > 0 && messages;
    });
    expect(unconfirmedMail.map((m: { subject: string }) => m.subject)).toEqual(['Confirm alert e-mails for "mail"']);

    expect(await service.notifyOrgAlertChannels(otherOrgId, alert)).toEqual([]);
  });
});
