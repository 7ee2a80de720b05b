import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createProject, createWebhook, expectStatus, jwtToken, startReceiver, uniquePath, type Project, type Receiver } from './support';

/**
 * POST /api/webhooks/{id}/test (docs/api-reference.md#webhooks): a signed webhook.test event
 * through the delivery lane, answered with the endpoint's outcome and kept in the delivery log.
 */

let app: TestApp;
let receiver: Receiver;
let p: Project;
let other: Project;
beforeAll(async () => {
  app = await startTestApp();
  receiver = await startReceiver();
  p = await createProject(app);
  other = await createProject(app);
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

async function hook(label: string) {
  const path = uniquePath(label);
  const created = await createWebhook(p.owner, { projectId: p.projectId, url: receiver.url(path) });
  receiver.expectSecret(path, created.secret);
  return { ...created, path };
}

describe('sending a test event to a webhook', () => {
  it('delivers a signed webhook.test, answers the outcome and logs it with the deliveries', async () => {
    const webhook = await hook('test-ok');
    const res = await p.admin.request('POST', `/api/webhooks/${webhook.id}/test`);
    expectStatus(res, 200, 'test send');
    expect(res.body).toMatchObject({ delivered: true, status: 'delivered', statusCode: 200, error: null });
    expect(res.body.durationMs).toEqual(expect.any(Number));

    const [received] = receiver.received(webhook.path);
    expect(received.svcSignatureValid).toBe(true);
    expect(received.standardSignatureValid).toBe(true);
    expect(received.headers['x-svc-event']).toBe('webhook.test');
    expect(received.body).toMatchObject({ event: 'webhook.test', timestamp: expect.any(String), data: { projectId: p.projectId, webhookId: webhook.id } });

    const log = await p.owner.request('GET', `/api/webhooks/${webhook.id}/deliveries`);
    expect(log.body.deliveries).toEqual([expect.objectContaining({ id: res.body.deliveryId, event: 'webhook.test', status: 'delivered', attemptCount: 1, lastStatusCode: 200 })]);
  });

  it('reports a failing endpoint after a single attempt, and a paused webhook as skipped without sending', async () => {
    const failing = await hook('test-fail');
    receiver.behave(failing.path, () => ({ status: 503 }));
    const res = await p.owner.request('POST', `/api/webhooks/${failing.id}/test`);
    expectStatus(res, 200, 'test send to a failing endpoint');
    expect(res.body).toMatchObject({ delivered: false, status: 'failed', statusCode: 503 });
    expect(res.body.error).toEqual(expect.any(String));
    expect(receiver.received(failing.path)).toHaveLength(1);

    const paused = await hook('test-paused');
    expectStatus(await p.owner.request('PATCH', `/api/webhooks/${paused.id}`, { active: false }), 200, 'pause');
    const skipped = await p.owner.request('POST', `/api/webhooks/${paused.id}/test`);
    expect(skipped.body).toMatchObject({ delivered: false, status: 'skipped' });
    expect(receiver.received(paused.path)).toHaveLength(0);
  });

  it('refuses a viewer and a member (403), another project (404), anonymous callers (401), and sends nothing', async () => {
    const webhook = await hook('test-refused');
    for (const user of [p.viewer, p.member]) expect((await user.request('POST', `/api/webhooks/${webhook.id}/test`)).status).toBe(403);
    expect((await other.owner.request('POST', `/api/webhooks/${webhook.id}/test`)).status).toBe(404);
    const foreignToken = await jwtToken(other.owner, other.projectId, ['manage_settings']);
    expect((await app.request('POST', `/api/webhooks/${webhook.id}/test`, { token: foreignToken })).status).toBe(404);
    expect((await app.request('POST', `/api/webhooks/${webhook.id}/test`)).status).toBe(401);
    const noCsrf = await app.request('POST', `/api/webhooks/${webhook.id}/test`, { cookie: p.owner.cookie });
    expect(noCsrf.status).toBe(403);
    const missing = await p.owner.request('POST', '/api/webhooks/whk_missing/test');
    expect(missing.status).toBe(404);
    expect((await p.owner.request('POST', `/api/webhooks/${'x'.repeat(129)}/test`)).status).toBe(400);
    expect(receiver.received(webhook.path)).toHaveLength(0);
    expect((await p.owner.request('GET', `/api/webhooks/${webhook.id}/deliveries`)).body.deliveries).toEqual([]);
  });

  it('allows 10 test sends per minute per webhook, then 429 with Retry-After', async () => {
    const webhook = await hook('test-limit');
    for (let i = 0; i < 10; i++) expectStatus(await p.owner.request('POST', `/api/webhooks/${webhook.id}/test`), 200, `test send ${i + 1}`);
    const limited = await p.owner.request('POST', `/api/webhooks/${webhook.id}/test`);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    await eventually(async () => receiver.received(webhook.path).length === 10);
    // Another webhook has its own budget.
    const second = await hook('test-limit-other');
    expectStatus(await p.owner.request('POST', `/api/webhooks/${second.id}/test`), 200, 'other webhook');
  });
});
