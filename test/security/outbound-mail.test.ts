import { randomBytes } from 'node:crypto';
import { eventually, startTestApp, type TestApp, type TestResponse, type TestUser } from '../support/harness';
import { expectStatus, startReceiver, uniquePath, type Receiver } from '../webhooks/support';

/**
 * What users can make us send to addresses of their choosing:
 * alert-channel tests and verification resends need a verified e-mail where it matters and are
 * throttled per user and per recipient; e-mail channels mail only recipients who confirmed;
 * accepting an invitation needs a verified e-mail.
 */

let app: TestApp;
let receiver: Receiver;
beforeAll(async () => {
  app = await startTestApp({ SEND_LIMIT_PER_USER: '3', SEND_LIMIT_PER_RECIPIENT: '2', SEND_LIMIT_WINDOW_SECONDS: '600' });
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const freshEmail = (what: string) => `${what}-${randomBytes(4).toString('hex')}@example.com`;
const mailbox = async (to: string) => ((await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(to)}`)).body.messages ?? []) as { subject: string; text: string; token?: string }[];

async function personalOrg(user: TestUser): Promise<string> {
  const orgs = await user.request('GET', '/api/orgs');
  expectStatus(orgs, 200, 'list orgs');
  return orgs.body.orgs[0].id;
}

async function channel(user: TestUser, orgId: string, body: Record<string, unknown>) {
  const res = await user.request('POST', `/api/orgs/${orgId}/alert-channels`, body);
  expectStatus(res, 201, 'create channel');
  return res.body;
}

const testSend = (user: TestUser, orgId: string, channelId: string) => user.request('POST', `/api/orgs/${orgId}/alert-channels/${channelId}/test`);

function expectNotVerified(res: TestResponse) {
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ error: 'Verify your email address first', code: 'EMAIL_NOT_VERIFIED', message: expect.stringMatching(/^Forbidden: verify your e-mail address/) });
}

function expectThrottled(res: TestResponse, about: RegExp) {
  expect(res.status).toBe(429);
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThan(0);
  expect(retryAfter).toBeLessThanOrEqual(600);
  expect(res.body).toEqual({ error: 'Too Many Requests', message: expect.stringMatching(about), retryAfter });
}

describe('alert-channel test sends', () => {
  it('need a verified e-mail of the caller', async () => {
    const user = await app.signup();
    const orgId = await personalOrg(user);
    const path = uniquePath('unverified');
    const c = await channel(user, orgId, { type: 'chat', name: 'chat', url: receiver.url(path) });
    expectNotVerified(await testSend(user, orgId, c.id));
    expect(receiver.received(path)).toEqual([]);
    // E-mail channels mail their recipients (a confirmation): creating one needs it too.
    expectNotVerified(await user.request('POST', `/api/orgs/${orgId}/alert-channels`, { type: 'email', name: 'mail', recipients: [freshEmail('x')] }));
    await app.platform.db.sql`UPDATE users SET email_verified = true WHERE id = ${user.id}`;
    expect((await testSend(user, orgId, c.id)).body).toMatchObject({ ok: true, status: 'delivered' });
  });

  it('are throttled per recipient across users and per user across recipients', async () => {
    const url = receiver.url(uniquePath('shared'));
    const first = await app.signup({ verified: true });
    const firstOrg = await personalOrg(first);
    const a = await channel(first, firstOrg, { type: 'webhook', name: 'a', url });
    expect((await testSend(first, firstOrg, a.id)).status).toBe(200);
    expect((await testSend(first, firstOrg, a.id)).status).toBe(200);
    expectThrottled(await testSend(first, firstOrg, a.id), /Too many messages sent to this destination/);

    // Another user aiming at the same destination shares its budget.
    const second = await app.signup({ verified: true });
    const secondOrg = await personalOrg(second);
    const b = await channel(second, secondOrg, { type: 'chat', name: 'b', url });
    expectThrottled(await testSend(second, secondOrg, b.id), /Too many messages sent to/);

    // One user spreading tests over fresh destinations runs out of their own budget.
    const third = await app.signup({ verified: true });
    const thirdOrg = await personalOrg(third);
    const channels = [];
    // Nothing listens there: each test is refused at once, and still counts.
    for (const n of [2, 3, 4, 5]) channels.push(await channel(third, thirdOrg, { type: 'chat', name: `c${n}`, url: `http://127.0.0.${n}:9/hook` }));
    for (const c of channels.slice(0, 3)) expect((await testSend(third, thirdOrg, c.id)).status).toBe(200);
    expectThrottled(await testSend(third, thirdOrg, channels[3].id), /Too many messages sent for this account/);
  });
});

describe('verification resends', () => {
  it('are throttled per address, need no verified e-mail, and do nothing once verified', async () => {
    const user = await app.signup();
    for (let i = 0; i < 2; i++) {
      const res = await user.request('POST', '/api/auth/resend-verification');
      expect(res.status).toBe(202);
      expect(res.body).toEqual({ sent: true });
    }
    expectThrottled(await user.request('POST', '/api/auth/resend-verification'), /Too many messages sent to/);
    // The signup mail and the two resends.
    await eventually(async () => (await mailbox(user.email)).length === 3);

    const verified = await app.signup({ verified: true });
    for (let i = 0; i < 4; i++) expect((await verified.request('POST', '/api/auth/resend-verification')).body).toEqual({ sent: false });
  });
});

describe('e-mail channel recipients', () => {
  it('each confirm once through a mailed token; alerts go to confirmed recipients only', async () => {
    const owner = await app.signup({ verified: true });
    const orgId = await personalOrg(owner);
    const yes = freshEmail('confirms');
    const no = freshEmail('ignores');
    const c = await channel(owner, orgId, { type: 'email', name: 'On call', recipients: [yes, no] });
    expect(c.recipients).toEqual([
      { email: yes, confirmed: false },
      { email: no, confirmed: false },
    ]);

    // Before anyone confirmed, a test send has nobody to mail.
    expect((await testSend(owner, orgId, c.id)).body).toMatchObject({ ok: false, status: 'skipped', error: expect.stringMatching(/no confirmed recipient/) });

    const invite = await eventually(async () => (await mailbox(yes)).find((m) => /Confirm/.test(m.subject)));
    expect(invite.text).toContain('On call');
    expect(invite.text).toContain(owner.email);
    const confirmed = await app.request('POST', '/api/alert-channels/recipients/confirm', { body: { token: invite.token } });
    expect(confirmed.status).toBe(200);
    expect(confirmed.body).toEqual({ channelId: c.id, email: yes, confirmed: true });
    // Once: the token is spent.
    expect((await app.request('POST', '/api/alert-channels/recipients/confirm', { body: { token: invite.token } })).status).toBe(400);
    expect((await app.request('POST', '/api/alert-channels/recipients/confirm', { body: { token: 'not-a-token' } })).status).toBe(400);

    const listed = (await owner.request('GET', `/api/orgs/${orgId}/alert-channels`)).body.channels.find((x: { id: string }) => x.id === c.id);
    expect(listed.recipients).toEqual([
      { email: yes, confirmed: true },
      { email: no, confirmed: false },
    ]);

    expect((await testSend(owner, orgId, c.id)).body).toMatchObject({ ok: true, status: 'queued' });
    await eventually(async () => (await mailbox(yes)).some((m) => /Test alert/.test(m.subject)));
    // Give a wrongly queued mail time to arrive before checking it did not.
    await new Promise((r) => setTimeout(r, 1500));
    expect((await mailbox(no)).map((m) => m.subject)).toEqual([expect.stringMatching(/Confirm/)]);
  });
});

describe('accepting an invitation', () => {
  it('needs a verified e-mail (403 with the reason), then works', async () => {
    const owner = await app.signup({ verified: true });
    const project = await owner.request('POST', '/api/projects', { name: `Invite ${randomBytes(2).toString('hex')}` });
    expectStatus(project, 201, 'create project');
    const email = freshEmail('invitee');
    expectStatus(await owner.request('POST', `/api/projects/${project.body.id}/invitations`, { email, role: 'member' }), 201, 'invite');
    const mail = await eventually(async () => (await mailbox(email)).find((m) => /invited/.test(m.subject)));
    const invitee = await app.signup({ email });
    const refused = await invitee.request('POST', `/api/invitations/${mail.token}/accept`);
    expectNotVerified(refused);
    expect(refused.body.message).toMatch(/accepting invitations/);
    expect((await invitee.request('GET', `/api/projects/${project.body.id}`)).status).toBe(404);

    const verification = await eventually(async () => (await mailbox(email)).find((m) => /Verify/.test(m.subject)));
    expect((await app.request('POST', '/api/auth/verify-email', { body: { token: verification.token } })).status).toBe(200);
    const accepted = await invitee.request('POST', `/api/invitations/${mail.token}/accept`);
    expect(accepted.status).toBe(200);
    expect(accepted.body.membership).toMatchObject({ userId: invitee.id, role: 'member' });
  });
});
