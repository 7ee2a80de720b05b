import { createCache, type Cache } from '../../api/infra/cache';
import { newId } from '../../api/infra/ids';
import { FLAG_CHANGES_CHANNEL, type FlagChangeEvent } from '../../api/features/flags/types';
import { OutboxRelay, type OutboxConsumer, type OutboxRelayOptions } from '../../api/lib/outbox/relay';
import { enqueueFlagEvent, OutboxStore } from '../../api/lib/outbox/store';
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
  // Consumers only a test registered: retired, so their pending rows do not pile up.
  const names = sql().array(app.platform.outbox.consumerNames);
  await sql()`DELETE FROM flag_outbox_pending WHERE consumer <> ALL(${names}::text[])`;
  await sql()`DELETE FROM outbox_consumers WHERE name <> ALL(${names}::text[])`;
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

/** Events `consumer` (default: any) has not handled yet. Test relays run only the consumers they were given. */
async function pendingCount(consumer?: string): Promise<number> {
  const [row] = consumer
    ? await sql()`SELECT count(*)::int AS n FROM flag_outbox_pending WHERE consumer = ${consumer}`
    : await sql()`SELECT count(DISTINCT seq)::int AS n FROM flag_outbox_pending`;
  return row.n;
}

/** A gate a test opens when it wants: until then whoever awaits `wait()` hangs. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { wait: () => opened, open };
}

describe('outbox relay on the platform', () => {
  it('publishes every committed change exactly once with the webhook envelope and the full flag', async () => {
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
    // Order is kept per flag and environment (each its own stream); streams run side by side.
    const byEnvironment = (environment: string) => eventsFor(received, key).filter((e) => e.data.environment === environment);
    expect(byEnvironment('development').map((e) => e.event)).toEqual(['flag.created', 'flag.updated', 'flag.toggled']);
    expect(byEnvironment('staging').map((e) => e.event)).toEqual(['flag.created', 'flag.deleted']);
    expect(byEnvironment('production').map((e) => e.event)).toEqual(['flag.created']);
    const events = [...byEnvironment('development'), byEnvironment('staging')[0], byEnvironment('production')[0], byEnvironment('staging')[1]];
    expect(eventsFor(received, key)).toHaveLength(6);
    expect(new Set(events.map((e) => e.id)).size).toBe(6);
    const updated = events[1];
    expect(updated).toEqual({
      id: expect.stringMatching(/^evt_/),
      event: 'flag.updated',
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/),
      data: { flagKey: key, projectId: fx.projectId, serviceId: fx.serviceId, environment: 'development', changes: { defaultValue: { from: 'a', to: 'b' } } },
      flag: expect.objectContaining({ id: created.body.id, key, defaultValue: 'b', enabled: false, version: 2 }),
      actor: fx.owner.email,
      actorUserId: fx.owner.id,
    });
    expect(events[2].data.changes).toEqual({ enabled: { from: false, to: true } });
    expect(events[2].flag).toMatchObject({ enabled: true, version: 3 });
    expect(events[0].data.changes.defaultValue).toEqual({ from: null, to: 'a' });
    expect(events[5].event).toBe('flag.deleted');
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

describe('each consumer at its own pace', () => {
  const versionsOf = (events: FlagChangeEvent[]) => events.map((e) => e.flag?.version);
  const oneToN = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

  /** A relay with `consumer`, once the consumer is registered (it gets the events committed after that). */
  async function startWith(consumer: OutboxConsumer) {
    testRelay({}, [consumer]).start();
    await eventually(async () => (await sql()`SELECT 1 FROM outbox_consumers WHERE name = ${consumer.name}`).length === 1);
  }

  it('a consumer that hangs delays only itself: the bus gets every later change in order, and the consumer catches up with nothing skipped', async () => {
    await app.platform.outbox.stop();
    const received = await listen();
    const key = uniqueKey();
    const hang = gate();
    const handled: FlagChangeEvent[] = [];
    await startWith({
      name: 'hanging',
      async handle(event) {
        if (event.data.flagKey !== key) return;
        await hang.wait();
        handled.push(event);
      },
    });
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    for (let i = 0; i < 10; i++) expect((await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`)).status).toBe(200);

    // Every change reaches the bus while the consumer still hangs on the first one.
    await eventually(async () => eventsFor(received, key).length === 11, 30_000);
    expect(versionsOf(eventsFor(received, key))).toEqual(oneToN(11));
    expect(handled).toHaveLength(0);

    hang.open();
    await eventually(async () => handled.length === 11, 30_000);
    expect(versionsOf(handled)).toEqual(oneToN(11));
    await eventually(async () => (await sql()`SELECT 1 FROM flag_outbox_pending WHERE flag_key = ${key} AND consumer = 'hanging'`).length === 0);
  });

  it('hands a consumer with handleMany the burst of a flag as one ordered batch, and retries the whole batch after a failure', async () => {
    await app.platform.outbox.stop();
    const key = uniqueKey();
    const batches: FlagChangeEvent[][] = [];
    let failOnce = true;
    const batching: OutboxConsumer = {
      name: 'batching',
      async handle(event) {
        if (event.data.flagKey === key) batches.push([event]);
      },
      async handleMany(events) {
        const mine = events.filter((e) => e.data.flagKey === key);
        if (mine.length && failOnce) {
          failOnce = false;
          throw new Error('receiver away');
        }
        if (mine.length) batches.push(mine);
      },
    };
    const first = testRelay({}, [batching]);
    first.start();
    await eventually(async () => (await sql()`SELECT 1 FROM outbox_consumers WHERE name = 'batching'`).length === 1);
    await first.stop();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    for (let i = 0; i < 10; i++) expect((await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`)).status).toBe(200);
    testRelay({}, [batching]).start();
    await eventually(async () => batches.flat().length === 11, 30_000);
    expect(batches).toHaveLength(1);
    expect(versionsOf(batches[0])).toEqual(oneToN(11));
  });

  it('a consumer that keeps failing retries on its own, then gets every event in order, each handled once', async () => {
    await app.platform.outbox.stop();
    const received = await listen();
    const key = uniqueKey();
    let failing = true;
    let failures = 0;
    const handled: FlagChangeEvent[] = [];
    await startWith({
      name: 'failing',
      async handle(event) {
        if (event.data.flagKey !== key) return;
        if (failing) {
          failures++;
          throw new Error('receiver down');
        }
        handled.push(event);
      },
    });
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    for (let i = 0; i < 10; i++) expect((await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`)).status).toBe(200);

    await eventually(async () => eventsFor(received, key).length === 11 && failures >= 3, 30_000);
    expect(versionsOf(eventsFor(received, key))).toEqual(oneToN(11));
    expect(handled).toHaveLength(0);
    const [row] = await sql()`SELECT count(*)::int AS n, count(last_error)::int AS failed FROM flag_outbox_pending WHERE flag_key = ${key} AND consumer = 'failing'`;
    // Only the first event was tried (and failed); the later ones wait behind it.
    expect(row).toEqual({ n: 11, failed: 1 });

    failing = false;
    await eventually(async () => handled.length === 11, 30_000);
    expect(versionsOf(handled)).toEqual(oneToN(11));
    await sleep(200);
    expect(handled).toHaveLength(11);
  });
});

/** A flag change committed by "another process": straight into the outbox, nobody nudges this process's relays. */
async function commitElsewhere(key: string): Promise<void> {
  const event: FlagChangeEvent = {
    id: newId('evt'),
    event: 'flag.updated',
    timestamp: new Date().toISOString(),
    data: { flagKey: key, projectId: fx.projectId, serviceId: fx.serviceId, environment: 'development', changes: {} },
    flag: null,
    actor: 'test',
    actorUserId: null,
  };
  await sql().begin((tx) => enqueueFlagEvent(tx, event));
}

// The poll is ten minutes in these tests: anything that arrives within the test's time was woken.
describe('waking instead of polling', () => {
  const TEN_MINUTES = 10 * 60_000;

  it('relays a commit of another process as soon as its notification arrives', async () => {
    await app.platform.outbox.stop();
    const received = await listen();
    testRelay({ pollIntervalMs: TEN_MINUTES, listen: true }).start();
    const keys = [uniqueKey(), uniqueKey()];
    for (const key of keys) {
      await commitElsewhere(key);
      await eventually(async () => eventsFor(received, key).length === 1);
    }
  });

  it('wakes a consumer when its retry is due', async () => {
    await app.platform.outbox.stop();
    const key = uniqueKey();
    const attempts: string[] = [];
    testRelay({ pollIntervalMs: TEN_MINUTES, listen: true }, [
      {
        name: 'flaky',
        async handle(event) {
          if (event.data.flagKey !== key) return;
          attempts.push(event.id);
          if (attempts.length < 3) throw new Error('receiver down');
        },
      },
    ]).start();
    await eventually(async () => (await sql()`SELECT 1 FROM outbox_consumers WHERE name = 'flaky'`).length === 1);
    await commitElsewhere(key);
    await eventually(async () => (await pendingCount('flaky')) === 0 && attempts.length === 3);
    expect(new Set(attempts).size).toBe(1);
  });

  it('an in-process commit wakes the relay without a notification', async () => {
    await app.platform.outbox.stop();
    const received = await listen();
    const relay = testRelay({ pollIntervalMs: TEN_MINUTES });
    relay.start();
    const key = uniqueKey();
    await commitElsewhere(key);
    relay.nudge();
    await eventually(async () => eventsFor(received, key).length === 1);
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
    expect(await pendingCount('bus')).toBe(0);
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
    // Each gets the events committed after its registration.
    await eventually(async () => (await sql()`SELECT 1 FROM outbox_consumers WHERE name IN ('flaky', 'steady')`).length === 2);
    const key = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'staging' });
    await fx.owner.request('POST', `/api/flags/${key}/toggle${ref('staging')}`);

    await eventually(async () => {
      const [row] = await sql()`SELECT count(*)::int AS n FROM flag_outbox_pending WHERE flag_key = ${key} AND consumer IN ('bus', 'flaky', 'steady')`;
      return row.n === 0 && flakyCalls.size === 2;
    });
    const ids = eventsFor(received, key).map((e) => e.id);
    expect(ids).toHaveLength(2);
    for (const id of ids) {
      expect(flakyCalls.get(id)).toBe(3);
      expect(steadyCalls.get(id)).toBe(1);
    }
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
    // A relay claims the event for the bus and then "crashes": it never publishes nor gives the lease back.
    const claimed = await new OutboxStore().claim(sql(), 'bus', 'dead-relay', 100, 4000);
    expect(claimed.map((c) => c.event.data.flagKey)).toContain(key);
    testRelay().start();
    await sleep(1000);
    expect(eventsFor(received, key)).toHaveLength(0);
    // Taken over once the lease ran out.
    await eventually(async () => eventsFor(received, key).length === 1, 30_000);
    expect(await sql()`SELECT 1 FROM flag_outbox_pending WHERE flag_key = ${key} AND consumer = 'bus'`).toHaveLength(0);
  });

  it('renews the lease of a consumer slower than the lease, so another relay never takes its events meanwhile', async () => {
    await app.platform.outbox.stop();
    const key = uniqueKey();
    const handled: string[] = [];
    const slow = (relay: string): OutboxConsumer => ({
      name: 'slow',
      async handle(event) {
        if (event.data.flagKey !== key) return;
        handled.push(`${relay}:${event.id}`);
        await sleep(1500); // five times the lease
      },
    });
    testRelay({ leaseMs: 300 }, [slow('a')]).start();
    await eventually(async () => (await sql()`SELECT 1 FROM outbox_consumers WHERE name = 'slow'`).length === 1);
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    await eventually(async () => handled.length === 1, 30_000);
    testRelay({ leaseMs: 300 }, [slow('b')]).start();
    await eventually(async () => (await sql()`SELECT 1 FROM flag_outbox_pending WHERE flag_key = ${key} AND consumer = 'slow'`).length === 0, 30_000);
    expect(handled).toHaveLength(1);
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
    expect(await sql()`SELECT 1 FROM flag_outbox_pending WHERE flag_key IN ${sql()(keys)} AND consumer = 'bus'`).toHaveLength(0);
  });

  it('never hands a consumer a later event of a flag while an earlier one is pending for it elsewhere', async () => {
    await app.platform.outbox.stop();
    const store = new OutboxStore();
    // Start from an empty backlog so the claims below see only this test's events.
    await sql()`DELETE FROM flag_outbox_pending`;
    const key = uniqueKey();
    const otherKey = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`);
    await fx.owner.request('POST', `/api/flags/${key}/toggle${ref()}`);
    await fx.owner.request('POST', '/api/flags', { key: otherKey, serviceId: fx.serviceId, environment: 'development' });
    const versions = (rows: { event: FlagChangeEvent }[]) => rows.map((r) => [r.event.data.flagKey, r.event.flag?.version]);

    const first = await store.claim(sql(), 'bus', 'relay-a', 1, 60_000);
    expect(versions(first)).toEqual([[key, 1]]);
    // Relay B may take the other flag's event but not versions 2 and 3 of the first flag.
    const second = await store.claim(sql(), 'bus', 'relay-b', 10, 60_000);
    expect(versions(second)).toEqual([[otherKey, 1]]);
    // Another consumer has its own position: the bus holding version 1 does not hold it back.
    expect(versions(await store.claim(sql(), 'webhooks', 'relay-b', 10, 60_000))).toEqual([
      [key, 1],
      [key, 2],
      [key, 3],
      [otherKey, 1],
    ]);
    // Once A has published version 1, the rest of that flag is free.
    await store.markDone(sql(), 'bus', first.map((r) => r.seq));
    const third = await store.claim(sql(), 'bus', 'relay-b', 10, 60_000);
    expect(versions(third)).toEqual([
      [key, 2],
      [key, 3],
    ]);
    // A failed publish (waiting for its retry) holds back the later events of its flag too.
    await fx.owner.request('POST', `/api/flags/${otherKey}/toggle${ref()}`);
    await store.markFailed(sql(), 'bus', second[0].seq, { error: 'bus down', retryInMs: 60_000 });
    expect(await store.claim(sql(), 'bus', 'relay-c', 10, 60_000)).toEqual([]);
    await store.markDone(sql(), 'bus', [...second, ...third].map((r) => r.seq));
    expect(versions(await store.claim(sql(), 'bus', 'relay-c', 10, 60_000))).toEqual([[otherKey, 2]]);
  });

  it('refuses consumers registered after start or twice', () => {
    const relay = testRelay();
    relay.register({ name: 'a', handle: async () => undefined });
    expect(() => relay.register({ name: 'a', handle: async () => undefined })).toThrow(/twice/);
    relay.start();
    expect(() => relay.register({ name: 'b', handle: async () => undefined })).toThrow(/after the relay started/);
  });

  it('prunes events past the retention that every consumer is past, never ones a consumer still needs', async () => {
    await app.platform.outbox.stop();
    const key = uniqueKey();
    await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development' });
    await sql()`UPDATE flag_outbox SET created_at = now() - interval '2 days'`;
    const pendingBefore = await pendingCount();
    expect(pendingBefore).toBeGreaterThan(0);
    const removed = await new OutboxStore().prune(sql(), 24 * 3600_000);
    expect(removed).toBeGreaterThan(0);
    // Gone: everything below the oldest event some consumer still needs.
    const [left] = await sql()`SELECT count(*)::int AS n FROM flag_outbox WHERE seq < (SELECT min(seq) FROM flag_outbox_pending)`;
    expect(left.n).toBe(0);
    expect(await pendingCount()).toBe(pendingBefore);
    expect(await sql()`SELECT 1 FROM flag_outbox WHERE flag_key = ${key}`).toHaveLength(1);
  });
});
