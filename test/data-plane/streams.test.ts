import { EventSource } from 'eventsource';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, personalToken, untilEvaluated, type DataPlaneFixture } from './support';

let app: TestApp;
let fx: DataPlaneFixture;

beforeAll(async () => {
  app = await startTestApp({ STREAM_HEARTBEAT_MS: '200' });
  fx = await createFixture(app);
});
afterAll(() => app?.stop());

interface Received {
  messages: any[];
  ids: string[];
  close(): void;
}

/** A browser-style EventSource (the `eventsource` package) collecting every message. */
function listen(url: string, token?: string): Promise<Received> {
  return new Promise((resolve, reject) => {
    const messages: any[] = [];
    const ids: string[] = [];
    const source = new EventSource(url, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers ?? {}), ...(token ? { Authorization: `Bearer ${token}` } : {}) } }),
    });
    source.onmessage = (event) => {
      messages.push(JSON.parse(event.data));
      ids.push(event.lastEventId);
      if (messages.length === 1) resolve({ messages, ids, close: () => source.close() });
    };
    source.onerror = (error) => {
      if (messages.length === 0) {
        source.close();
        reject(new Error(`stream failed: ${(error as { message?: string }).message ?? 'error'}`));
      }
    };
  });
}

const toggle = (key: string, enabled: boolean, environment = 'development') =>
  fx.owner.request('POST', `/api/flags/${key}/toggle?serviceId=${fx.serviceId}&environment=${environment}`, { enabled });

describe('GET /api/flags/stream', () => {
  it('sends connected first, then flag-update with the full flag per change (public flags for anonymous clients)', async () => {
    const pub = await createFlag(fx.owner, fx.serviceId, { isPublic: true, enabled: false });
    const priv = await createFlag(fx.owner, fx.serviceId, { enabled: false });
    await untilEvaluated(app, { flagKey: pub.key, serviceId: fx.serviceId }, (r) => r.reason === 'DEFAULT');
    const anonymous = await listen(`${app.urls.data}/api/flags/stream?serviceId=${fx.serviceId}&environment=development`);
    const member = await listen(`${app.urls.control}/api/flags/stream?serviceId=${fx.serviceId}`, fx.readToken);
    try {
      expect(anonymous.messages[0]).toMatchObject({ type: 'connected', serviceId: fx.serviceId, environment: 'development' });
      expect(member.messages[0]).toMatchObject({ type: 'connected', environment: null });
      expect((await toggle(priv.key, true)).status).toBe(200);
      expect((await toggle(pub.key, true)).status).toBe(200);
      await eventually(async () => member.messages.filter((m) => m.type === 'flag-update').length >= 2);
      await eventually(async () => anonymous.messages.length >= 2);
      const update = anonymous.messages[1];
      expect(update).toMatchObject({ type: 'flag-update', flagKey: pub.key, event: 'flag.toggled', serviceId: fx.serviceId, environment: 'development' });
      expect(update.flag).toMatchObject({ key: pub.key, enabled: true, isPublic: true, updatedAt: expect.any(String), version: 2 });
      // The anonymous client never hears of the private flag.
      expect(anonymous.messages.some((m) => m.flagKey === priv.key)).toBe(false);
      expect(member.messages.map((m) => m.flagKey)).toEqual(expect.arrayContaining([priv.key, pub.key]));
      // Every event carries an id: SSE `id:` lines.
      expect(anonymous.ids[1]).toBeTruthy();
      // A flag that stops being public is announced as deleted to anonymous clients.
      expect((await fx.owner.request('PATCH', `/api/flags/${pub.key}?serviceId=${fx.serviceId}&environment=development`, { isPublic: false })).status).toBe(200);
      await eventually(async () => anonymous.messages.find((m) => m.type === 'flag-deleted' && m.flagKey === pub.key));
    } finally {
      anonymous.close();
      member.close();
    }
  });

  it('filters by environment and ends a closed client subscription', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: false, environment: 'staging' });
    const staging = await listen(`${app.urls.data}/api/flags/stream?serviceId=${fx.serviceId}&environment=staging`, fx.readToken);
    const production = await listen(`${app.urls.data}/api/flags/stream?serviceId=${fx.serviceId}&environment=production`, fx.readToken);
    const hub = app.platform.evaluation!.hub;
    expect(hub.size).toBeGreaterThanOrEqual(2);
    const before = hub.size;
    await toggle(flag.key, true, 'staging');
    await eventually(async () => staging.messages.length >= 2);
    expect(staging.messages[1]).toMatchObject({ flagKey: flag.key, environment: 'staging' });
    expect(production.messages).toHaveLength(1);
    staging.close();
    production.close();
    await eventually(async () => hub.size <= before - 2);
  });

  it('sends heartbeats and replays changes after Last-Event-ID', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: false });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.reason === 'DEFAULT', { token: fx.readToken });
    const first = await listen(`${app.urls.data}/api/flags/stream?serviceId=${fx.serviceId}`, fx.readToken);
    await toggle(flag.key, true);
    await eventually(async () => first.messages.length >= 2);
    const seenId = first.ids[1];
    first.close();
    // Two changes while nobody listens.
    await toggle(flag.key, false);
    await toggle(flag.key, true);
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === false && r.reason === 'DEFAULT', { token: fx.readToken });
    await eventually(async () => (await app.platform.db.sql`SELECT version FROM flags WHERE id = ${flag.id}`)[0].version === 4);
    await new Promise((r) => setTimeout(r, 200));

    const controller = new AbortController();
    const res = await fetch(`${app.urls.data}/api/flags/stream?serviceId=${fx.serviceId}`, {
      headers: { Authorization: `Bearer ${fx.readToken}`, Accept: 'text/event-stream', 'Last-Event-ID': seenId },
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('cache-control')).toContain('no-cache');
    const reader = res.body!.getReader();
    let text = '';
    const decoder = new TextDecoder();
    while (!(text.includes(': heartbeat') && (text.match(/"type":"flag-update"/g) ?? []).length >= 2)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    controller.abort();
    const frames = text.split('\n\n').filter((f) => f.includes('data:'));
    const payloads = frames.map((f) => JSON.parse(f.split('\n').find((l) => l.startsWith('data: '))!.slice(6)));
    expect(payloads[0].type).toBe('connected');
    const updates = payloads.filter((p) => p.type === 'flag-update' && p.flagKey === flag.key);
    expect(updates.map((u) => u.flag.version)).toEqual([3, 4]);
    expect(frames.filter((f) => f.includes('flag-update')).every((f) => /^id: .+/m.test(f))).toBe(true);
    // The resumed `connected` message has no id, so the client's position only moves with replayed events.
    expect(frames[0]).not.toMatch(/^id: /m);
  });

  it('refuses personal tokens (403 FORBIDDEN) on both listeners and hides services from outsiders', async () => {
    const pat = await personalToken(app, fx.owner, 'read');
    for (const listener of ['control', 'data'] as const) {
      for (const path of ['/api/flags/stream', '/api/connect/stream']) {
        const res = await app.request('GET', `${path}?serviceId=${fx.serviceId}&environment=development`, { listener, token: pat });
        expect(res.status).toBe(403);
        expect(res.body.error).toBe('FORBIDDEN');
      }
    }
    const unknownAnonymous = await app.request('GET', '/api/flags/stream?serviceId=svc_missing', { listener: 'data' });
    expect(unknownAnonymous.status).toBe(401);
    const unknownMember = await app.request('GET', '/api/flags/stream?serviceId=svc_missing', { listener: 'data', token: fx.readToken });
    expect(unknownMember.status).toBe(404);
    const noService = await app.request('GET', '/api/flags/stream', { listener: 'data', token: fx.readToken });
    expect(noService.status).toBe(400);
    const badEnv = await app.request('GET', `/api/flags/stream?serviceId=${fx.serviceId}&environment=qa`, { listener: 'data', token: fx.readToken });
    expect(badEnv.status).toBe(400);
  });
});

describe('GET /api/connect/stream', () => {
  it('streams the same messages and echoes the clientId', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: false });
    const stream = await listen(`${app.urls.data}/api/connect/stream?serviceId=${fx.serviceId}&environment=development&clientId=web-1`, fx.readToken);
    try {
      expect(stream.messages[0]).toMatchObject({ type: 'connected', clientId: 'web-1', serviceId: fx.serviceId });
      await toggle(flag.key, true);
      await eventually(async () => stream.messages.find((m) => m.type === 'flag-update' && m.flagKey === flag.key));
    } finally {
      stream.close();
    }
  });
});

describe('across replicas', () => {
  let replica: TestApp;
  beforeAll(async () => {
    replica = await startTestApp({
      DATABASE_URL: app.databaseUrl,
      REDIS_KEY_PREFIX: app.platform.config.REDIS_KEY_PREFIX,
      CLICKHOUSE_DATABASE: app.platform.config.CLICKHOUSE_DATABASE,
      ROLES: 'data',
    });
  });
  afterAll(() => replica?.stop());

  // How fast a write reaches streams is a benchmark figure (bench/streams.ts); here the delivery, with room for a loaded machine.
  it('delivers a change made on one replica to a stream on another, and serves it there', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: false });
    await untilEvaluated(replica, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.reason === 'DEFAULT', { token: fx.readToken, listener: 'data' });
    const stream = await listen(`${replica.urls.data}/api/flags/stream?serviceId=${fx.serviceId}`, fx.readToken);
    try {
      expect((await toggle(flag.key, true)).status).toBe(200);
      await eventually(async () => stream.messages.find((m) => m.flagKey === flag.key && m.flag?.enabled === true), 30_000, 10);
      const res = await replica.request('POST', '/api/flags/evaluate', { listener: 'data', token: fx.readToken, body: { flagKey: flag.key, serviceId: fx.serviceId, defaultValue: 'x' } });
      expect(res.body).toMatchObject({ value: false, reason: 'DEFAULT' });
    } finally {
      stream.close();
    }
  });
});

describe('shutdown', () => {
  it('ends open streams so stopping does not wait for SSE clients', async () => {
    const own = await startTestApp({ SHUTDOWN_GRACE_MS: '120000' });
    const ofx = await createFixture(own);
    const res = await fetch(`${own.urls.data}/api/flags/stream?serviceId=${ofx.serviceId}`, { headers: { Authorization: `Bearer ${ofx.readToken}` } });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await reader.read();
    const started = Date.now();
    await own.stop();
    // Far below the grace period: stopping did not wait for the client.
    expect(Date.now() - started).toBeLessThan(60_000);
    // The client sees the end of the stream.
    let done = false;
    while (!done) done = (await reader.read()).done;
    expect(done).toBe(true);
  });
});
