import { createCache, type Cache } from '../../api/infra/cache';
import { newId } from '../../api/infra/ids';
import { FLAG_CHANGES_CHANNEL, type FlagChangeEvent } from '../../api/features/flags/types';
import { OutboxRelay, type OutboxConsumer, type OutboxRelayOptions } from '../../api/features/outbox/relay';
import { enqueueFlagEvent, OutboxStore } from '../../api/features/outbox/store';
import { createProjectFixture, query, type ProjectFixture } from '../flags/fixtures';
import { eventually, startTestApp, type TestApp } from '../support/harness';

let app: TestApp;
let fx: ProjectFixture;

beforeAll(async () => {
  app = await startTestApp();
  fx = await createProjectFixture(app, 'Outbox project');
});
afterAll(() => app?.stop());

/** Relays and caches a test started; stopped after it, and the platform relay restarted. */
const started: { relays: OutboxRelay[]; caches: Cache[]; unsubscribe: (() => Promise<void>)[] } = { relays: [], caches: [], unsubscribe: [] };
afterEach(async () => {
  await Promise.all(started.relays.splice(0).map((r) => r.stop()));
  await Promise.all(started.unsubscribe.splice(0).map((u) => u()));
  await Promise.all(started.caches.splice(0).map((c) => c.close()));
  app?.platform.outbox.start();
});

let counter = 0;
const uniqueKey = () => `outbox-${++counter}-${Date.now().toString(36)}`;
const ref = (environment = 'development') => query({ serviceId: fx.serviceId, environment });
const sql = () => app.platform.db.sql;

/** Every bus message from now on, parsed. */
async function listen(): Promise<FlagChangeEvent[]> {
  const received: FlagChangeEvent[] = [];
  const unsubscribe = await app.platform.cache.subscribe(FLAG_CHANGES_CHANNEL, (message) => received.push(JSON.parse(message)));
  started.unsubscribe.push(unsubscribe);
  return received;
}

function testRelay(opts: Partial<OutboxRelayOptions> = {}, consumers: OutboxConsumer[] = []): OutboxRelay {
  const relay = new OutboxRelay({ sql: sql(), cache: app.platform.cache, logger: app.platform.logger, pollIntervalMs: 10, retryBaseMs: 20, retryMaxMs: 200, ...opts });
  for (const c of consumers) relay.register(c);
  started.relays.push(relay);
  return relay;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const eventsFor = (received: FlagChangeEvent[], key: string) => received.filter((e) => e.data.flagKey === key);

async function pendingCount(): Promise<number> {
  const [row] = await sql()`SELECT count(*)::int AS n FROM flag_outbox WHERE completed_at IS NULL`;
  return row.n;
}

describe('outbox relay on the platform', () => {
  it('publishes every committed change exactly once with the spec 6.1 envelope and the full flag', async () => {
    const received = await listen();
    const key = uniqueKey();
    const created = await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, type: 'string', defaultValue: 'a' });
    expect(created.status).toBe(201);
    expect((await fx.owner.request('PATCH', `/api/flags/${key}${ref()}`, { defaultValue: 'b' })).status).toBe(200);
    expect((await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`)).status).toBe(200);
    expect((await fx.owner.request('DELETE', `/api/flags/${key}${ref('staging')}`)).status).toBe(204);
    // A write that fails (duplicate) commits nothing and so publishes nothing.
    expect((await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId })).status).toBe(409);

    await eventually(async () => eventsFor(received, key).length >= 6);
    await sleep(300);
    const events = eventsFor(received, key);
    expect(events.map((e) => `${e.event}:${e.data.environment}`)).toEqual([
      'flag.created:development',
      'flag.created:staging',
      'flag.created:production',
      'flag.updated:development',
      'flag.toggled:development',
      'flag.deleted:staging',
    ]);
    expect(new Set(events.map((e) => e.id)).size).toBe(6);
    const updated = events[3];
    expect(updated).toEqual({
      id: expect.stringMatching(/^evt_/),
      event: 'flag.updated',
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/),
      data: { flagKey: key, projectId: fx.projectId, serviceId: fx.serviceId, environment: 'development', changes: { defaultValue: { from: 'a', to: 'b' } } },
      flag: expect.objectContaining({ id: created.body.id, key, defaultValue: 'b', enabled: false, version: 2 }),
      actor: fx.owner.email,
      actorUserId: fx.owner.id,
    });
    expect(events[4].data.changes).toEqual({ enabled: { from: false, to: true } });
    expect(events[4].flag).toMatchObject({ enabled: true, version: 3 });
    expect(events[0].data.changes.defaultValue).toEqual({ from: null, to: 'a' });
    expect(events[5].flag).toBeNull();
    expect(events[5].data.changes.name).toEqual({ from: key, to: null });
    // Distinct timestamps per change of a flag: with event and flagKey they identify a delivery.
    expect(new Set(events.filter((e) => e.data.environment === 'development').map((e) => e.timestamp)).size).toBe(3);
    await eventually(async () => (await pendingCount()) === 0);
  });

  // Each change reaches the bus on its own (no batching that waits for more), in order; how fast
  // is not asserted on a shared, loaded test machine.
  it('makes each change visible on the bus before the next one is made', async () => {
    const received = await listen();
    const key = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'production' });
    await eventually(async () => eventsFor(received, key).length === 1, 30_000);
    for (let i = 0; i < 10; i++) {
      await fx.owner.request('POST', `/api/flags/${key}/toggle${ref('production')}`);
      await eventually(async () => eventsFor(received, key).length === i + 2, 30_000, 2);
    }
    expect(eventsFor(received, key).map((e) => e.flag?.version)).toEqual(Array.from({ length: 11 }, (_, i) => i + 1));
  });
});

describe('relay restarts and failures', () => {
  it('resumes after a stop: changes made while no relay runs all arrive once, in order per flag', async () => {
    const received = await listen();
    await app.platform.outbox.stop();
    const key = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    for (let i = 0; i < 15; i++) await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`);
    await sleep(300);
    expect(eventsFor(received, key)).toHaveLength(0);
    expect(await pendingCount()).toBeGreaterThanOrEqual(16);

    testRelay().start();
    await eventually(async () => eventsFor(received, key).length >= 16);
    await sleep(300);
    const events = eventsFor(received, key);
    expect(events).toHaveLength(16);
    expect(events.map((e) => e.flag?.version)).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
    expect(await pendingCount()).toBe(0);
  });

  it('retries a failing consumer with backoff without publishing to the bus again or re-running consumers that succeeded', async () => {
    await app.platform.outbox.stop();
    const received = await listen();
    const flakyCalls = new Map<string, number>();
    const steadyCalls = new Map<string, number>();
    const flaky: OutboxConsumer = {
      name: 'flaky',
      async handle(event) {
        const n = (flakyCalls.get(event.id) ?? 0) + 1;
        flakyCalls.set(event.id, n);
        if (n <= 2) throw new Error(`temporary failure ${n}`);
      },
    };
    const steady: OutboxConsumer = {
      name: 'steady',
      async handle(event) {
        steadyCalls.set(event.id, (steadyCalls.get(event.id) ?? 0) + 1);
      },
    };
    testRelay({}, [flaky, steady]).start();
    const key = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'staging' });
    await fx.owner.request('POST', `/api/flags/${key}/toggle${ref('staging')}`);

    await eventually(async () => {
      const [row] = await sql()`SELECT count(*)::int AS n FROM flag_outbox WHERE flag_key = ${key} AND completed_at IS NOT NULL`;
      return row.n === 2;
    });
    const ids = eventsFor(received, key).map((e) => e.id);
    expect(ids).toHaveLength(2);
    for (const id of ids) {
      expect(flakyCalls.get(id)).toBe(3);
      expect(steadyCalls.get(id)).toBe(1);
    }
    const rows = await sql()`SELECT attempts, last_error, consumers_done FROM flag_outbox WHERE flag_key = ${key}`;
    for (const row of rows) expect(row).toMatchObject({ attempts: 3, last_error: null });
    await sleep(200);
    expect(eventsFor(received, key)).toHaveLength(2);
  });

  it('keeps trying the bus until it accepts, never publishing a later change of a flag before an earlier one', async () => {
    await app.platform.outbox.stop();
    const received = await listen();
    let failuresLeft = 3;
    const flakyBus: Cache = Object.create(app.platform.cache, {
      publish: {
        value: async (channel: string, message: string) => {
          const event = JSON.parse(message) as FlagChangeEvent;
          if (event.flag?.version === 2 && failuresLeft-- > 0) throw new Error('bus unavailable');
          return app.platform.cache.publish(channel, message);
        },
      },
    });
    const key = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'production' });
    for (let i = 0; i < 4; i++) await fx.owner.request('POST', `/api/flags/${key}/toggle${ref('production')}`);
    testRelay({ cache: flakyBus }).start();
    await eventually(async () => eventsFor(received, key).length >= 5);
    await sleep(200);
    expect(eventsFor(received, key).map((e) => e.flag?.version)).toEqual([1, 2, 3, 4, 5]);
    expect(failuresLeft).toBeLessThan(0);
  });

  it('takes over the events of a relay that died holding a lease', async () => {
    await app.platform.outbox.stop();
    const received = await listen();
    const key = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    // A relay claims the event and then "crashes": it never publishes nor gives the lease back.
    const claimed = await new OutboxStore(sql()).claim('dead-relay', 100, 2000);
    expect(claimed.map((c) => c.event.data.flagKey)).toContain(key);
    const [{ available_at: leaseEnd }] = await sql()`SELECT available_at FROM flag_outbox WHERE flag_key = ${key}`;
    testRelay().start();
    await eventually(async () => eventsFor(received, key).length === 1, 30_000);
    // Taken over only once the lease ran out (both times from the database's clock, so a slow
    // machine cannot reorder them), by a second claim.
    const [row] = await sql()`SELECT published_at, claimed_by, attempts FROM flag_outbox WHERE flag_key = ${key}`;
    expect(row.published_at.getTime()).toBeGreaterThanOrEqual(leaseEnd.getTime());
    expect(row).toMatchObject({ claimed_by: expect.not.stringMatching(/^dead-relay$/), attempts: 2 });
  });

  it('does not skip an event whose transaction commits after a later one', async () => {
    await app.platform.outbox.stop();
    const received = await listen();
    testRelay().start();
    const slowKey = uniqueKey();
    const fastKey = uniqueKey();
    const slowEvent: FlagChangeEvent = {
      id: newId('evt'),
      event: 'flag.updated',
      timestamp: new Date().toISOString(),
      data: { flagKey: slowKey, projectId: fx.projectId, serviceId: fx.serviceId, environment: 'development', changes: {} },
      flag: null,
      actor: 'test',
      actorUserId: null,
    };
    await sql().begin(async (tx) => {
      await enqueueFlagEvent(tx, slowEvent); // takes the lower seq, commits last
      const created = await fx.owner.request('POST', '/api/flags', { key: fastKey, serviceId: fx.serviceId, environment: 'development' });
      expect(created.status).toBe(201);
      await eventually(async () => eventsFor(received, fastKey).length === 1);
    });
    await eventually(async () => eventsFor(received, slowKey).length === 1);
    const [slow, fast] = await sql()`SELECT seq FROM flag_outbox WHERE flag_key IN (${slowKey}, ${fastKey}) ORDER BY seq`;
    expect(Number(slow.seq)).toBeLessThan(Number(fast.seq));
  });

  it('lets several relays share the work: each event once, each flag in order', async () => {
    await app.platform.outbox.stop();
    const received = await listen();
    for (let i = 0; i < 3; i++) {
      const cache = createCache(process.env.REDIS_URL, app.platform.config.REDIS_KEY_PREFIX);
      started.caches.push(cache);
      testRelay({ cache, batchSize: 7, pollIntervalMs: 5, owner: `replica-${i}` }).start();
    }
    const keys = [uniqueKey(), uniqueKey(), uniqueKey()];
    for (const key of keys) await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    await Promise.all(
      keys.map(async (key) => {
        for (let i = 0; i < 30; i++) await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`);
      }),
    );
    await eventually(async () => keys.every((k) => eventsFor(received, k).length >= 31));
    await sleep(300);
    for (const key of keys) {
      const events = eventsFor(received, key);
      expect(events.map((e) => e.flag?.version)).toEqual(Array.from({ length: 31 }, (_, i) => i + 1));
    }
    const owners = await sql()`SELECT DISTINCT attempts FROM flag_outbox WHERE flag_key IN ${sql()(keys)}`;
    expect(owners.map((o) => o.attempts)).toEqual([1]);
  });

  it('never hands out a later event of a flag while an earlier one is unpublished elsewhere', async () => {
    await app.platform.outbox.stop();
    const store = new OutboxStore(sql());
    // Start from an empty backlog so the claims below see only this test's events.
    await sql()`UPDATE flag_outbox SET completed_at = now(), published_at = COALESCE(published_at, now()) WHERE completed_at IS NULL`;
    const key = uniqueKey();
    const otherKey = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`);
    await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`);
    await fx.owner.request('POST', '/api/flags', { key: otherKey, serviceId: fx.serviceId, environment: 'development' });

    const first = await store.claim('relay-a', 1, 60_000);
    expect(first.map((r) => [r.event.data.flagKey, r.event.flag?.version])).toEqual([[key, 1]]);
    // Relay B may take the other flag's event but not versions 2 and 3 of the first flag.
    const second = await store.claim('relay-b', 10, 60_000);
    expect(second.map((r) => [r.event.data.flagKey, r.event.flag?.version])).toEqual([[otherKey, 1]]);
    // Once A has published version 1, the rest of that flag is free.
    await store.markPublished(first.map((r) => r.seq));
    const third = await store.claim('relay-b', 10, 60_000);
    expect(third.map((r) => [r.event.data.flagKey, r.event.flag?.version])).toEqual([
      [key, 2],
      [key, 3],
    ]);
    // A failed bus publish (waiting for its retry) holds back the later events of its flag too.
    await fx.owner.request('POST', `/api/flags/${otherKey}/toggle${ref()}`);
    await store.markFailed(second[0].seq, { consumersDone: [], error: 'bus down', retryInMs: 60_000 });
    expect(await store.claim('relay-c', 10, 60_000)).toEqual([]);
    await store.markCompleted([...first, ...second, ...third].map((r) => r.seq));
    expect((await store.claim('relay-c', 10, 60_000)).map((r) => [r.event.data.flagKey, r.event.flag?.version])).toEqual([[otherKey, 2]]);
  });

  it('refuses consumers registered after start or twice', () => {
    const relay = testRelay();
    relay.register({ name: 'a', handle: async () => undefined });
    expect(() => relay.register({ name: 'a', handle: async () => undefined })).toThrow(/twice/);
    relay.start();
    expect(() => relay.register({ name: 'b', handle: async () => undefined })).toThrow(/after the relay started/);
  });

  it('prunes completed events past the retention, never pending ones', async () => {
    await app.platform.outbox.stop();
    const key = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    await sql()`UPDATE flag_outbox SET completed_at = now() - interval '2 days' WHERE completed_at IS NOT NULL`;
    const pendingBefore = await pendingCount();
    expect(pendingBefore).toBeGreaterThan(0);
    const removed = await new OutboxStore(sql()).prune(24 * 3600_000);
    expect(removed).toBeGreaterThan(0);
    const [left] = await sql()`SELECT count(*)::int AS n FROM flag_outbox WHERE completed_at IS NOT NULL`;
    expect(left.n).toBe(0);
    expect(await pendingCount()).toBe(pendingBefore);
  });
});
