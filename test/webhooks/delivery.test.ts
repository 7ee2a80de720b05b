import { randomBytes } from 'node:crypto';
import { DeliveryQueue, DeliveryStore } from '../../api/features/webhooks/deliveries';
import { WebhookDispatcher } from '../../api/features/webhooks/dispatcher';
import { WebhookStore } from '../../api/features/webhooks/store';
import type { FlagChangeEvent } from '../../api/features/flags/types';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, createWebhook, expectStatus, qs, startReceiver, uniquePath, type Project, type Receiver } from './support';

/**
 * End to end over the real servers: flag actions -> outbox -> webhook consumer -> Temporal
 * delivery workflow -> a local receiver that checks signatures in constant time.
 */

let app: TestApp;
let receiver: Receiver;
beforeAll(async () => {
  app = await startTestApp();
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function hook(p: Project, label: string, extra: Record<string, unknown> = {}) {
  const path = uniquePath(label);
  const created = await createWebhook(p.owner, { projectId: p.projectId, url: receiver.url(path), ...extra });
  receiver.expectSecret(path, created.secret);
  return { ...created, path };
}

async function deliveriesOf(p: Project, webhookId: string, query = '') {
  const res = await p.owner.request('GET', `/api/webhooks/${webhookId}/deliveries${query}`);
  expectStatus(res, 200, 'list deliveries');
  return res.body as { deliveries: any[]; hasMore: boolean; nextCursor: string | null };
}

/** Waits until the webhook's only delivery is finished, and returns it. */
async function settledDelivery(p: Project, webhookId: string, timeoutMs = 30_000) {
  return eventually(async () => {
    const { deliveries } = await deliveriesOf(p, webhookId);
    return deliveries.length === 1 && deliveries[0].status !== 'pending' ? deliveries[0] : undefined;
  }, timeoutMs, 200);
}

describe('every flag action reaches every subscribed webhook exactly once', () => {
  it('delivers created, updated, toggled, rollback and deleted; filtered by events; paused and foreign webhooks get nothing', async () => {
    const p = await createProject(app);
    const other = await createProject(app);
    const all = await hook(p, 'all');
    const toggledOnly = await hook(p, 'toggled', { events: ['flag.toggled'] });
    const paused = await hook(p, 'paused');
    expectStatus(await p.owner.request('PATCH', `/api/webhooks/${paused.id}`, { active: false }), 200, 'pause');
    const foreign = await hook(other, 'foreign');

    const key = `checkout-${randomBytes(3).toString('hex')}`;
    const ref = qs({ serviceId: p.serviceId, environment: 'production' });
    await createFlag(p.owner, p.serviceId, key);
    expectStatus(await p.owner.request('PATCH', `/api/flags/${key}${ref}`, { name: 'Checkout v2' }), 200, 'patch');
    expectStatus(await p.owner.request('POST', `/api/flags/${key}/toggle${ref}`), 200, 'toggle');
    expectStatus(await p.owner.request('POST', `/api/flags/${key}/toggle${ref}`, { enabled: false }), 200, 'toggle with body');
    expectStatus(await p.owner.request('PATCH', `/api/flags/${key}${ref}`, { enabled: true }), 200, 'patch enabled');
    expectStatus(await p.owner.request('POST', `/api/flags/${key}/rollback/1${ref}`), 200, 'rollback');
    expectStatus(await p.owner.request('DELETE', `/api/flags/${key}${ref}`), 204, 'delete');

    await eventually(async () => receiver.received(all.path).length >= 7 && receiver.received(toggledOnly.path).length >= 2, 30_000);
    await sleep(1500); // anything extra would have arrived by now

    const got = receiver.received(all.path);
    expect(got.map((d) => d.body.event).sort()).toEqual(
      ['flag.created', 'flag.updated', 'flag.toggled', 'flag.toggled', 'flag.updated', 'flag.updated', 'flag.deleted'].sort(),
    );
    // (event, flagKey, timestamp) identifies a delivery; each arrived once
    // (docs/api-reference.md#webhooks).
    expect(new Set(got.map((d) => `${d.body.event}|${d.body.data.flagKey}|${d.body.timestamp}`)).size).toBe(7);
    expect(new Set(got.map((d) => d.headers['webhook-id'])).size).toBe(7);
    for (const d of got) {
      expect(d.svcSignatureValid).toBe(true);
      expect(d.standardSignatureValid).toBe(true);
      expect(d.headers['content-type']).toBe('application/json');
      expect(d.headers['x-svc-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
      expect(Object.keys(d.body).sort()).toEqual(['data', 'event', 'timestamp']);
      expect(d.body.data).toMatchObject({ flagKey: key, projectId: p.projectId, serviceId: p.serviceId, changes: expect.any(Object) });
      expect(new Date(d.body.timestamp).toISOString()).toBeTruthy();
      expect(Math.abs(Number(d.headers['webhook-timestamp']) * 1000 - d.receivedAt)).toBeLessThan(60_000);
    }
    const toggles = got.filter((d) => d.body.event === 'flag.toggled').map((d) => d.body.data.changes.enabled);
    expect(toggles).toEqual(expect.arrayContaining([{ from: false, to: true }, { from: true, to: false }]));
    const renamed = got.find((d) => d.body.event === 'flag.updated' && d.body.data.changes.name);
    expect(renamed!.body.data.changes.name).toEqual({ from: key, to: 'Checkout v2' });

    expect(receiver.received(toggledOnly.path).map((d) => d.body.event)).toEqual(['flag.toggled', 'flag.toggled']);
    expect(receiver.received(toggledOnly.path).every((d) => d.svcSignatureValid && d.standardSignatureValid)).toBe(true);
    expect(receiver.received(paused.path)).toEqual([]);
    expect(receiver.received(foreign.path)).toEqual([]);

    const log = await deliveriesOf(p, all.id);
    expect(log.deliveries).toHaveLength(7);
    expect(log.deliveries.every((d) => d.status === 'delivered' && d.attemptCount === 1 && d.attempts[0].statusCode === 200)).toBe(true);
    expect((await deliveriesOf(p, paused.id)).deliveries).toEqual([]);
  });

  it('delivers one event per flag for bulk create, update and delete', async () => {
    const p = await createProject(app);
    const h = await hook(p, 'bulk');
    const keys = [0, 1, 2].map((i) => `bulk-${i}-${randomBytes(2).toString('hex')}`);
    const item = (key: string) => ({ key, serviceId: p.serviceId, environment: 'staging' });
    expectStatus(await p.owner.request('POST', '/api/flags/bulk', { flags: keys.map((key) => ({ ...item(key), type: 'boolean' })) }), 201, 'bulk create');
    expectStatus(await p.owner.request('PATCH', '/api/flags/bulk', { flags: keys.map((key) => ({ ...item(key), updates: { description: 'bulk' } })) }), 200, 'bulk update');
    expectStatus(await p.owner.request('DELETE', '/api/flags/bulk', { flags: keys.map(item) }), 200, 'bulk delete');
    await eventually(async () => receiver.received(h.path).length >= 9, 30_000);
    await sleep(1500);
    const got = receiver.received(h.path);
    expect(got).toHaveLength(9);
    for (const [event, key] of keys.flatMap((key) => ['flag.created', 'flag.updated', 'flag.deleted'].map((e) => [e, key]))) {
      expect(got.filter((d) => d.body.event === event && d.body.data.flagKey === key)).toHaveLength(1);
    }
    expect(got.every((d) => d.svcSignatureValid && d.body.data.environment === 'staging')).toBe(true);
  });

  it('handles the same outbox event twice with a single delivery (consumer idempotency)', async () => {
    const p = await createProject(app);
    const h = await hook(p, 'dup');
    const dispatcher = new WebhookDispatcher({
      sql: app.platform.db.sql,
      store: new WebhookStore(),
      queue: new DeliveryQueue(app.platform.temporal, app.platform.db.sql, new DeliveryStore()),
    });
    const event: FlagChangeEvent = {
      id: `evt_${randomBytes(6).toString('hex')}`,
      event: 'flag.toggled',
      timestamp: new Date().toISOString(),
      data: { flagKey: 'dup-flag', projectId: p.projectId, serviceId: p.serviceId, environment: 'production', changes: { enabled: { from: false, to: true } } },
      flag: null,
      actor: 'test',
      actorUserId: null,
    };
    await Promise.all([dispatcher.handle(event), dispatcher.handle(event)]);
    await eventually(async () => receiver.received(h.path).length === 1);
    await settledDelivery(p, h.id);
    await dispatcher.handle(event); // after completion too
    await sleep(1500);
    expect(receiver.received(h.path)).toHaveLength(1);
    const rows = await app.platform.db.sql`SELECT id FROM outbound_deliveries WHERE event_id = ${event.id}`;
    expect(rows).toHaveLength(1);
    expect(rows[0].id).toBe(`whd:${h.id}:${event.id}`);
    expect(receiver.received(h.path)[0].headers['webhook-id']).toBe(rows[0].id);
  });

  it('prunes finished deliveries older than the retention period, never pending ones', async () => {
    const p = await createProject(app);
    const h = await hook(p, 'retention');
    const { sql } = app.platform.db;
    const insert = (id: string, status: string, completedDaysAgo: number | null) => sql`
      INSERT INTO outbound_deliveries (id, webhook_id, event, event_id, body, status, created_at, completed_at)
      VALUES (${id}, ${h.id}, 'flag.toggled', ${id}, '{}', ${status}, now() - interval '40 days',
              ${completedDaysAgo === null ? null : sql`now() - make_interval(days => ${completedDaysAgo})`})`;
    await insert(`old-${h.id}`, 'delivered', 31);
    await insert(`stuck-${h.id}`, 'pending', null);
    await insert(`recent-${h.id}`, 'failed', 29);
    const queue = new DeliveryQueue(app.platform.temporal, sql, new DeliveryStore());
    await queue.enqueue({ target: { kind: 'webhook', webhookId: h.id }, event: 'flag.toggled', eventId: `evt_${randomBytes(4).toString('hex')}`, body: '{}' });
    await eventually(async () => (await sql`SELECT 1 FROM outbound_deliveries WHERE id = ${`old-${h.id}`}`).length === 0);
    const left = await sql`SELECT id FROM outbound_deliveries WHERE webhook_id = ${h.id} AND id LIKE ${'%-' + h.id} ORDER BY id`;
    expect(left.map((r) => r.id)).toEqual([`recent-${h.id}`, `stuck-${h.id}`]);
  });

  it('pages the delivery log newest first', async () => {
    const p = await createProject(app);
    const h = await hook(p, 'paged', { events: ['flag.toggled'] });
    const key = `paged-${randomBytes(3).toString('hex')}`;
    await createFlag(p.owner, p.serviceId, key);
    for (let i = 0; i < 3; i++) {
      expectStatus(await p.owner.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`), 200, 'toggle');
    }
    await eventually(async () => (await deliveriesOf(p, h.id)).deliveries.filter((d) => d.status === 'delivered').length === 3);
    const first = await deliveriesOf(p, h.id, '?limit=2');
    expect(first.deliveries).toHaveLength(2);
    expect(first.hasMore).toBe(true);
    const second = await deliveriesOf(p, h.id, `?limit=2&cursor=${encodeURIComponent(first.nextCursor!)}`);
    expect(second.deliveries).toHaveLength(1);
    expect(second.hasMore).toBe(false);
    expect(second.nextCursor).toBeNull();
    const all = [...first.deliveries, ...second.deliveries];
    expect(new Set(all.map((d) => d.id)).size).toBe(3);
    const times = all.map((d) => d.createdAt);
    expect([...times].sort().reverse()).toEqual(times);
    expect(all.map((d) => d.payload.data.changes.enabled.to)).toEqual([true, false, true]);
    expect((await p.owner.request('GET', `/api/webhooks/${h.id}/deliveries?limit=0`)).status).toBe(400);
  });
});

describe('retry policy: 4 attempts, 0/1/2/4 s apart, only 5xx, 429 and timeouts retried', () => {
  let p: Project;
  const hooks: Record<string, { id: string; path: string; secret: string }> = {};
  const behaviours: Record<string, (n: number) => { status: number; delayMs?: number; headers?: Record<string, string> }> = {
    flaky: (n) => ({ status: n < 3 ? 500 : 200 }),
    bad: () => ({ status: 400 }),
    down: () => ({ status: 503 }),
    busy: (n) => ({ status: n === 1 ? 429 : 204 }),
    // Answers long after the 10 s timeout, so a timer that fires late on a loaded machine still fires first.
    slow: (n) => (n === 1 ? { status: 200, delayMs: 30_000 } : { status: 200 }),
    redirect: () => ({ status: 302, headers: { location: '/elsewhere' } }),
  };

  beforeAll(async () => {
    p = await createProject(app);
    for (const [name, behaviour] of Object.entries(behaviours)) {
      hooks[name] = await hook(p, name, { events: ['flag.toggled'] });
      receiver.behave(hooks[name].path, behaviour);
    }
    const key = `retry-${randomBytes(3).toString('hex')}`;
    await createFlag(p.owner, p.serviceId, key);
    // One toggle fans out to every scenario at once, so they run in parallel.
    expectStatus(await p.owner.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`), 200, 'toggle');
  });

  // Gaps have lower bounds only: a loaded machine makes them longer, never shorter. The exact
  // schedule (the workflow's timers) is test/workflows/webhook-delivery.test.ts.
  const gaps = (times: number[]) => times.slice(1).map((t, i) => t - times[i]);

  it('delivers on the third attempt after 500, 500, keeping the webhook-id and the exact body', async () => {
    const d = await settledDelivery(p, hooks.flaky.id);
    expect(d.status).toBe('delivered');
    expect(d.attempts.map((a: any) => [a.attempt, a.outcome, a.statusCode])).toEqual([
      [1, 'retry', 500],
      [2, 'retry', 500],
      [3, 'delivered', 200],
    ]);
    const got = receiver.received(hooks.flaky.path);
    expect(got).toHaveLength(3);
    expect(new Set(got.map((g) => g.headers['webhook-id'])).size).toBe(1);
    expect(new Set(got.map((g) => g.rawBody)).size).toBe(1);
    expect(got.every((g) => g.svcSignatureValid && g.standardSignatureValid)).toBe(true);
    const [first, second] = gaps(got.map((g) => g.receivedAt));
    expect(first).toBeGreaterThanOrEqual(950);
    expect(second).toBeGreaterThanOrEqual(1950);
    expect(d.attempts.every((a: any) => typeof a.durationMs === 'number' && a.startedAt)).toBe(true);
  });

  it('fails at once on a 400 (one attempt)', async () => {
    const d = await settledDelivery(p, hooks.bad.id);
    expect(d).toMatchObject({ status: 'failed', attemptCount: 1, lastStatusCode: 400, lastError: expect.stringMatching(/^HTTP 400/) });
    await sleep(1500);
    expect(receiver.received(hooks.bad.path)).toHaveLength(1);
  });

  it('gives up after four attempts of a failing receiver, 1, 2 and 4 s apart', async () => {
    const d = await settledDelivery(p, hooks.down.id);
    expect(d.status).toBe('failed');
    expect(d.attempts.map((a: any) => [a.outcome, a.statusCode])).toEqual([
      ['retry', 503],
      ['retry', 503],
      ['retry', 503],
      ['retry', 503],
    ]);
    const got = receiver.received(hooks.down.path);
    expect(got).toHaveLength(4);
    const [a, b, c] = gaps(got.map((g) => g.receivedAt));
    expect(a).toBeGreaterThanOrEqual(950);
    expect(b).toBeGreaterThanOrEqual(1950);
    expect(c).toBeGreaterThanOrEqual(3950);
  });

  it('retries a 429', async () => {
    const d = await settledDelivery(p, hooks.busy.id);
    expect(d.status).toBe('delivered');
    expect(d.attempts.map((a: any) => a.statusCode)).toEqual([429, 204]);
  });

  it('times out a receiver slower than 10 s, then retries', async () => {
    const d = await settledDelivery(p, hooks.slow.id, 40_000);
    expect(d.status).toBe('delivered');
    expect(d.attempts).toHaveLength(2);
    expect(d.attempts[0]).toMatchObject({ outcome: 'retry', statusCode: null, error: 'no response within 10 s' });
    expect(d.attempts[0].durationMs).toBeGreaterThanOrEqual(9900);
    expect(d.attempts[0].durationMs).toBeLessThan(30_000);
    expect(d.attempts[1]).toMatchObject({ outcome: 'delivered', statusCode: 200 });
    expect(receiver.received(hooks.slow.path)).toHaveLength(2);
  });

  it('does not follow redirects and does not retry them', async () => {
    const d = await settledDelivery(p, hooks.redirect.id);
    expect(d).toMatchObject({ status: 'failed', attemptCount: 1, lastStatusCode: 302, lastError: expect.stringMatching(/redirects are not followed/) });
    expect(receiver.received('/elsewhere')).toEqual([]);
  });
});

describe('pausing or deleting a webhook stops its retries', () => {
  let p: Project;
  let pauseMe: Awaited<ReturnType<typeof hook>>;
  let deleteMe: Awaited<ReturnType<typeof hook>>;
  beforeAll(async () => {
    p = await createProject(app);
    pauseMe = await hook(p, 'pause-me', { events: ['flag.toggled'] });
    deleteMe = await hook(p, 'delete-me', { events: ['flag.toggled'] });
    receiver.behave(pauseMe.path, () => ({ status: 500 }));
    receiver.behave(deleteMe.path, () => ({ status: 500 }));
    const key = `stop-${randomBytes(3).toString('hex')}`;
    await createFlag(p.owner, p.serviceId, key);
    expectStatus(await p.owner.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`), 200, 'toggle');
    // Both act within the 1 s backoff after the first attempt.
    await eventually(async () => receiver.received(pauseMe.path).length >= 1 && receiver.received(deleteMe.path).length >= 1, 15_000, 20);
    await Promise.all([
      p.owner.request('PATCH', `/api/webhooks/${pauseMe.id}`, { active: false }),
      p.owner.request('DELETE', `/api/webhooks/${deleteMe.id}`),
    ]);
  });

  it('skips the remaining attempts of a paused webhook', async () => {
    const d = await settledDelivery(p, pauseMe.id);
    expect(d.status).toBe('skipped');
    expect(d.attempts.map((a: any) => [a.attempt, a.outcome])).toEqual([
      [1, 'retry'],
      [2, 'skipped'],
    ]);
    expect(d.attempts[1].error).toBe('the webhook is paused');
    expect(receiver.received(pauseMe.path)).toHaveLength(1);
  });

  it('sends nothing more for a deleted webhook, and its log goes with it', async () => {
    await sleep(4000);
    expect(receiver.received(deleteMe.path)).toHaveLength(1);
    const rows = await app.platform.db.sql`SELECT 1 FROM outbound_deliveries WHERE webhook_id = ${deleteMe.id}`;
    expect(rows).toHaveLength(0);
  });
});
