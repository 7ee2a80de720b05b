import { randomBytes } from 'node:crypto';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, createWebhook, expectStatus, qs, startReceiver, uniquePath, type Project, type Receiver } from './support';

/**
 * The SSRF guard with private targets refused (the production setting): at write time for
 * webhooks and alert channels, and again at delivery time for a stored URL.
 */

let app: TestApp;
let receiver: Receiver;
let p: Project;
beforeAll(async () => {
  app = await startTestApp({ ALLOW_PRIVATE_WEBHOOK_TARGETS: 'false' });
  receiver = await startReceiver();
  p = await createProject(app);
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const internalTargets = [
  ['loopback', 'http://127.0.0.1:8080/hook', /127\.0\.0\.1 is a loopback address/],
  ['localhost', 'http://localhost/hook', /localhost resolves to a loopback address/],
  ['IPv6 loopback', 'http://[::1]/hook', /loopback/],
  ['IPv4-mapped loopback', 'http://[::ffff:127.0.0.1]/hook', /loopback/],
  ['cloud metadata', 'http://169.254.169.254/latest/meta-data/', /cloud metadata/],
  ['IPv6 metadata', 'http://[fd00:ec2::254]/', /cloud metadata/],
  ['private network', 'http://10.1.2.3/hook', /private/],
  ['CGNAT', 'http://100.64.0.1/hook', /carrier-grade NAT/],
  ['link-local', 'http://169.254.10.10/', /link-local/],
  ['unique-local', 'http://[fd12::1]/', /unique-local/],
  ['decimal loopback', 'http://2130706433/', /loopback/],
] as const;

describe('at write time', () => {
  it.each(internalTargets)('refuses a webhook to %s with 400', async (_what, url, message) => {
    const res = await p.owner.request('POST', '/api/webhooks', { projectId: p.projectId, url });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/^Invalid url: /);
    expect(res.body.details).toEqual([{ path: 'body.url', message: expect.stringMatching(message) }]);
  });

  it('accepts a public address and refuses to move it to an internal one', async () => {
    const hook = await createWebhook(p.owner, { projectId: p.projectId, url: 'http://93.184.216.34/hook' });
    const res = await p.owner.request('PATCH', `/api/webhooks/${hook.id}`, { url: 'http://169.254.169.254/' });
    expect(res.status).toBe(400);
    expect((await p.owner.request('GET', `/api/webhooks/${hook.id}`)).body.url).toBe('http://93.184.216.34/hook');
  });

  it.each([
    ['chat', { type: 'chat', name: 'c', url: 'http://127.0.0.1/x' }],
    ['paging', { type: 'paging', name: 'p', routingKey: 'k', url: 'http://10.0.0.1/enqueue' }],
    ['webhook', { type: 'webhook', name: 'w', url: 'http://[::1]/' }],
  ])('refuses an internal %s alert channel with 400', async (_type, body) => {
    const res = await p.owner.request('POST', `/api/orgs/${p.orgId}/alert-channels`, body);
    expect(res.status).toBe(400);
    expect(res.body.details[0].path).toBe('body.url');
  });
});

describe('at delivery time', () => {
  it('refuses a stored URL that now points inside (no request is made, no retry)', async () => {
    const hook = await createWebhook(p.owner, { projectId: p.projectId, url: 'http://93.184.216.34/hook', events: ['flag.toggled'] });
    // What a DNS change after creation amounts to: the stored target now leads to a loopback receiver.
    const path = uniquePath('inside');
    await app.platform.db.sql`UPDATE webhooks SET url = ${receiver.url(path)} WHERE id = ${hook.id}`;
    const key = `ssrf-${randomBytes(3).toString('hex')}`;
    await createFlag(p.owner, p.serviceId, key);
    expectStatus(await p.owner.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`), 200, 'toggle');
    const delivery = await eventually(async () => {
      const res = await p.owner.request('GET', `/api/webhooks/${hook.id}/deliveries`);
      const d = res.body.deliveries?.[0];
      return d && d.status !== 'pending' ? d : undefined;
    }, 20_000);
    expect(delivery).toMatchObject({ status: 'failed', attemptCount: 1, lastStatusCode: null, lastError: expect.stringMatching(/127\.0\.0\.1 is a loopback address/) });
    expect(receiver.received(path)).toEqual([]);
  });
});
