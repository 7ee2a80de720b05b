import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FlagChangeEvent } from '../../api/features/flags/types';
import { DeliveryQueue, DeliveryStore, MAX_SIGNALS_IN_FLIGHT } from '../../api/features/webhooks/deliveries';
import { WebhookDispatcher } from '../../api/features/webhooks/dispatcher';
import { WebhookStore } from '../../api/features/webhooks/store';
import type { Sql } from '../../api/infra/postgres';
import type { Temporal } from '../../api/infra/temporal';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createProject, createWebhook, startReceiver, uniquePath, type Receiver } from './support';

/**
 * Dispatch keeps pace with change. The shape of the work is asserted, not its
 * speed: an event's deliveries are recorded by one statement whatever the number of webhooks,
 * their workflow starts overlap (bounded), and a re-dispatch finds the same delivery ids.
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

/** The real connection, counting the statements that insert delivery rows. */
function countingSql(sql: Sql, counter: { inserts: number }): Sql {
  return new Proxy(sql, {
    apply(target, self, args: unknown[]) {
      const strings = args[0] as TemplateStringsArray | undefined;
      if (Array.isArray(strings) && 'raw' in strings && strings.join('?').includes('INSERT INTO outbound_deliveries')) counter.inserts++;
      return Reflect.apply(target, self, args);
    },
  });
}

/** The real Temporal client, counting workflow starts in flight at once. */
function countingTemporal(temporal: Temporal, counter: { inFlight: number; maxInFlight: number; starts: number }): Temporal {
  const real = temporal.client;
  const workflow = {
    signalWithStart: async (...args: Parameters<Client['workflow']['signalWithStart']>) => {
      counter.starts++;
      counter.maxInFlight = Math.max(counter.maxInFlight, ++counter.inFlight);
      try {
        return await real.workflow.signalWithStart(...args);
      } finally {
        counter.inFlight--;
      }
    },
  };
  return { ...temporal, client: { workflow } as unknown as Client };
}

describe('webhook dispatch', () => {
  it('records an event for every webhook in one statement, signals each webhook lane concurrently, and a re-dispatch reuses the delivery ids', async () => {
    const p = await createProject(app);
    const hooks: { id: string; path: string; secret: string }[] = [];
    for (let i = 0; i < 8; i++) {
      const path = uniquePath(`fan-${i}`);
      const created = await createWebhook(p.owner, { projectId: p.projectId, url: receiver.url(path), events: ['flag.toggled'] });
      receiver.expectSecret(path, created.secret);
      hooks.push({ ...created, path });
    }
    const sqlCount = { inserts: 0 };
    const starts = { inFlight: 0, maxInFlight: 0, starts: 0 };
    const sql = countingSql(app.platform.db.sql, sqlCount);
    const dispatcher = new WebhookDispatcher({
      sql,
      store: new WebhookStore(),
      queue: new DeliveryQueue(countingTemporal(app.platform.temporal, starts), sql, new DeliveryStore()),
    });
    const event: FlagChangeEvent = {
      id: `evt_${randomBytes(6).toString('hex')}`,
      event: 'flag.toggled',
      timestamp: new Date().toISOString(),
      data: { flagKey: 'fan-out', projectId: p.projectId, serviceId: p.serviceId, environment: 'production', changes: { enabled: { from: false, to: true } } },
      flag: null,
      actor: 'test',
      actorUserId: null,
    };

    await dispatcher.handle(event);
    expect(sqlCount.inserts).toBe(1);
    expect(starts.starts).toBe(hooks.length);
    expect(starts.maxInFlight).toBeGreaterThan(1);
    expect(starts.maxInFlight).toBeLessThanOrEqual(MAX_SIGNALS_IN_FLIGHT);

    await eventually(async () => hooks.every((h) => receiver.received(h.path).length === 1), 30_000);
    await dispatcher.handle(event); // the relay retrying an event it had handled
    await sleep(1500);
    const ids = hooks.map((h) => receiver.received(h.path).map((d) => d.headers['webhook-id']));
    expect(ids).toEqual(hooks.map((h) => [`whd:${h.id}:${event.id}`]));
    const rows = await app.platform.db.sql`SELECT count(*)::int AS n FROM outbound_deliveries WHERE event_id = ${event.id}`;
    expect(rows[0].n).toBe(hooks.length);
  });

  it('a burst of deliveries to one webhook is one signal to its lane, and every delivery arrives once', async () => {
    const p = await createProject(app);
    const path = uniquePath('burst');
    const h = await createWebhook(p.owner, { projectId: p.projectId, url: receiver.url(path) });
    receiver.expectSecret(path, h.secret);
    const starts = { inFlight: 0, maxInFlight: 0, starts: 0 };
    const queue = new DeliveryQueue(countingTemporal(app.platform.temporal, starts), app.platform.db.sql, new DeliveryStore());
    const n = MAX_SIGNALS_IN_FLIGHT + 8;
    const eventIds = Array.from({ length: n }, (_, i) => `evt_${i}_${randomBytes(4).toString('hex')}`);
    const results = await queue.enqueueMany(eventIds.map((eventId) => ({ target: { kind: 'webhook', webhookId: h.id }, event: 'flag.toggled', eventId, body: '{}' })));
    expect(results.every((r) => r.queued)).toBe(true);
    expect(starts.starts).toBe(1);
    expect(starts.inFlight).toBe(0);
    await eventually(async () => receiver.received(path).length === n, 60_000, 200);
    expect(new Set(receiver.received(path).map((d) => d.headers['webhook-id'])).size).toBe(n);
  });
});
