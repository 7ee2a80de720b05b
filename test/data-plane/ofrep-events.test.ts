import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { OFREPWebProvider } from '@openfeature/ofrep-web-provider';
import { OpenFeature, ProviderEvents, type Client } from '@openfeature/web-sdk';
import { EventSource } from 'eventsource';
import { JwtCodec } from '../../api/auth/jwt';
import { createLogger } from '../../api/infra/logger';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { expectOfrepBulk, expectOfrepEventData } from '../support/ofrep-schema';
import { createFixture, createFlag, personalToken, untilEvaluated, type DataPlaneFixture } from './support';

/**
 * OFREP event streams (ADR-0008) for static-context (web) providers. The published
 * OpenFeature web SDK and OFREP web provider run here in Node, with the `eventsource` package
 * as the browser's EventSource and polling off: a change reaches them through the stream.
 */

// What a browser has and Node does not.
(globalThis as { EventSource?: unknown }).EventSource = EventSource;

/** Every log line of the app, to show no channel token is ever logged. */
const logLines: string[] = [];
const logSink = new Writable({
  write(chunk, _enc, done) {
    logLines.push(...chunk.toString().split('\n').filter(Boolean));
    done();
  },
});
/** Every channel token a bulk answer handed out in this file. */
const issuedChannels = new Set<string>();

let app: TestApp;
let fx: DataPlaneFixture;
let other: DataPlaneFixture;

beforeAll(async () => {
  // Tests wait by polling from one address: room for that under the per-IP limit.
  app = await startTestApp({ STREAM_HEARTBEAT_MS: '300', RATE_LIMIT_PER_IP: '100000' }, { logger: createLogger('info', logSink) });
  fx = await createFixture(app);
  other = await createFixture(app);
});
afterAll(async () => {
  await OpenFeature.close();
  await app?.stop();
});

interface BulkOptions {
  base?: string;
  token?: string;
  serviceId?: string;
  environment?: string;
  query?: string;
  headers?: Record<string, string>;
  context?: Record<string, unknown>;
}

/** POST /api/ofrep/v1/evaluate/flags, checked against the published schema. */
async function bulk(o: BulkOptions = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-service-id': o.serviceId ?? fx.serviceId, ...(o.headers ?? {}) };
  if (o.environment) headers['x-environment'] = o.environment;
  if (o.token) headers.authorization = `Bearer ${o.token}`;
  const res = await fetch(`${o.base ?? app.urls.data}/api/ofrep/v1/evaluate/flags${o.query ?? ''}`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ context: o.context ?? { targetingKey: 'user-1' } }),
  });
  const text = await res.text();
  const body = text ? JSON.parse(text) : undefined;
  const answer = { status: res.status, body, headers: res.headers, text };
  expectOfrepBulk(answer);
  for (const s of body?.eventStreams ?? []) issuedChannels.add(new URL(s.url).searchParams.get('channel')!);
  return answer;
}

/** The bulk ETag once a re-fetch with it answers 304 (the replica's configuration held still in between). */
async function settledEtag(): Promise<string> {
  return eventually(async () => {
    const etag = (await bulk({ token: fx.readToken })).headers.get('etag')!;
    const again = await bulk({ token: fx.readToken, headers: { 'if-none-match': etag } });
    return again.status === 304 && etag;
  }, 30_000, 200);
}

async function streamUrl(o: BulkOptions = {}): Promise<string> {
  const res = await bulk(o);
  expect(res.status).toBe(200);
  expect(res.body.eventStreams).toHaveLength(1);
  return res.body.eventStreams[0].url as string;
}

interface Frame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** A raw SSE reader: every frame as it arrives, and when the server ends the stream. */
interface RawStream {
  status: number;
  frames: Frame[];
  text: () => string;
  ended: Promise<void>;
  close(): void;
}

async function openRaw(url: string, headers: Record<string, string> = {}): Promise<RawStream> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const frames: Frame[] = [];
  let text = '';
  let pending = '';
  const ended = (async () => {
    if (!res.body) return;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        const chunk = decoder.decode(value, { stream: true });
        text += chunk;
        pending += chunk;
        let cut: number;
        while ((cut = pending.indexOf('\n\n')) >= 0) {
          frames.push(parseFrame(pending.slice(0, cut)));
          pending = pending.slice(cut + 2);
        }
      }
    } catch {
      // Aborted by close().
    }
  })();
  return { status: res.status, frames, text: () => text, ended, close: () => abort.abort() };
}

function parseFrame(block: string): Frame {
  const frame: Frame = {};
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) frame.comment = line.slice(1).trim();
    const m = /^(id|event|data): ?(.*)$/.exec(line);
    if (m) frame[m[1] as 'id' | 'event' | 'data'] = m[2];
  }
  return frame;
}

/** The refetchEvaluation messages of a stream, each checked against the published schema. */
function refetches(stream: RawStream) {
  return stream.frames
    .filter((f) => f.data !== undefined)
    .map((f) => {
      const data = JSON.parse(f.data!);
      expectOfrepEventData(data);
      return { id: f.id, event: f.event, data };
    });
}

const toggle = (key: string, enabled: boolean, serviceId = fx.serviceId) =>
  fx.owner.request('POST', `/api/flags/${key}/toggle?serviceId=${serviceId}&environment=development`, { enabled });

/** On for everyone while enabled (a rule without conditions), off (its default) while disabled. */
const SWITCH = { type: 'boolean', enabled: true, defaultValue: false, targeting: [{ conditions: [], value: true }] };

async function servedFlag(body: Record<string, unknown> = SWITCH) {
  const flag = await createFlag(fx.owner, fx.serviceId, body);
  await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId, context: { targetingKey: 'u' } }, (r) => r.reason !== 'ERROR', { token: fx.readToken, listener: 'data' });
  return flag;
}

/** A project API token and its id. */
async function tokenWithId(projectId: string, body: Record<string, unknown>) {
  const res = await fx.owner.request('POST', `/api/projects/${projectId}/tokens`, { name: `t-${Date.now()}`, ...body });
  expect(res.status).toBe(201);
  return { id: res.body.token.id as string, value: (res.body.value ?? res.body.accessToken) as string };
}

let domains = 0;
/** The OpenFeature web SDK with the OFREP web provider on `base`, polling off, no local storage. */
async function webClient(base: string, token: string, serviceId = fx.serviceId): Promise<{ client: Client; changes: () => number }> {
  const domain = `web-${++domains}`;
  const provider = new OFREPWebProvider({
    baseUrl: `${base}/api`,
    headers: [
      ['Authorization', `Bearer ${token}`],
      ['X-Service-Id', serviceId],
    ],
    pollInterval: 0,
    cacheMode: 'disabled',
  });
  await OpenFeature.setContext(domain, { targetingKey: `visitor-${domain}` });
  await OpenFeature.setProviderAndWait(domain, provider);
  const client = OpenFeature.getClient(domain);
  let changes = 0;
  client.addHandler(ProviderEvents.ConfigurationChanged, () => changes++);
  return { client, changes: () => changes };
}

/**
 * Toggles the flag and waits until the web client serves the new value. Polling is off, so only
 * the event stream can tell it; how fast it does is measured by bench:propagation, not here.
 */
async function toggleAndSee(client: Client, key: string, enabled: boolean, serviceId = fx.serviceId): Promise<void> {
  expect((await toggle(key, enabled, serviceId)).status).toBe(200);
  await eventually(async () => client.getBooleanValue(key, !enabled) === enabled, 20_000, 10);
}

describe('bulk answers name an event stream', () => {
  it('for project API tokens that read the service; its URL carries a channel token, never the API token', async () => {
    const res = await bulk({ token: fx.readToken });
    expect(res.status).toBe(200);
    expect(res.body.eventStreams).toEqual([{ type: 'sse', url: expect.stringMatching(/^http:\/\/.+\/api\/ofrep\/v1\/event-stream\?/), inactivityDelaySec: 120 }]);
    const url = new URL(res.body.eventStreams[0].url);
    expect(url.origin).toBe(app.urls.data);
    expect(url.searchParams.get('serviceId')).toBe(fx.serviceId);
    expect(url.searchParams.get('environment')).toBe('development');
    expect(url.searchParams.get('channel')).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(url.href).not.toContain(fx.readToken);
    expect(res.headers.get('etag')).toMatch(/^W\/".+"$/);

    // The control plane names itself.
    const control = await bulk({ base: app.urls.control, token: fx.readToken });
    expect(new URL(control.body.eventStreams[0].url).origin).toBe(app.urls.control);

    // A JWT access token too.
    const jwt = await tokenWithId(fx.projectId, { scopes: ['read'] });
    expect((await bulk({ token: jwt.value })).body.eventStreams).toHaveLength(1);

    // Nobody else: anonymous callers (public flags), a session, a token without read, a token of another project.
    expect((await bulk()).body.eventStreams).toBeUndefined();
    const session = await app.request('POST', '/api/ofrep/v1/evaluate/flags', {
      cookie: fx.viewer.cookie,
      headers: { 'x-service-id': fx.serviceId },
      body: { context: { targetingKey: 'u' } },
    });
    expect(session.status).toBe(200);
    expectOfrepBulk(session);
    expect(session.body.eventStreams).toBeUndefined();
    expect((await bulk({ token: fx.writeOnlyToken })).body.eventStreams).toBeUndefined();
    const foreign = await bulk({ token: other.readToken });
    expect(foreign.status).toBe(200);
    expect(foreign.body.eventStreams).toBeUndefined();
  });

  it('answers the published reasons in bulk, with Last-Modified beside the ETag', async () => {
    const variant = await servedFlag({ type: 'string', enabled: true, defaultValue: 'a', variants: [{ name: 'only', value: 'b', weight: 100 }] });
    const res = await bulk({ token: fx.readToken });
    expect(res.body.flags.find((f: { key: string }) => f.key === variant.key)).toMatchObject({ value: 'b', reason: 'SPLIT', variant: 'only' });
    expect(Date.parse(res.headers.get('last-modified')!)).toBeGreaterThan(Date.now() - 3600_000);
  });
});

describe('the OpenFeature web SDK with the OFREP web provider (polling off)', () => {
  for (const listener of ['control', 'data'] as const) {
    it(`sees a change through the event stream on the ${listener} listener`, async () => {
      const flag = await servedFlag();
      const { client, changes } = await webClient(app.urls[listener], fx.readToken);
      expect(client.getBooleanDetails(flag.key, false)).toMatchObject({ value: true, reason: 'TARGETING_MATCH' });

      await toggleAndSee(client, flag.key, false);
      expect(client.getBooleanDetails(flag.key, true)).toMatchObject({ value: false, reason: 'DISABLED' });
      expect(changes()).toBeGreaterThanOrEqual(1);
      await toggleAndSee(client, flag.key, true);
    });
  }
});

describe('the event stream', () => {
  it('sends one refetchEvaluation per change with stable ids, the new ETag and lastModified, and heartbeats', async () => {
    const flag = await servedFlag();
    const first = await bulk({ token: fx.readToken });
    const stream = await openRaw(first.body.eventStreams[0].url);
    try {
      expect(stream.status).toBe(200);
      await eventually(async () => stream.text().includes(': heartbeat'));
      expect(refetches(stream)).toEqual([]);

      expect((await toggle(flag.key, false)).status).toBe(200);
      expect((await toggle(flag.key, true)).status).toBe(200);
      await eventually(async () => refetches(stream).length >= 2);
      const [one, two] = refetches(stream);
      expect(one).toMatchObject({ event: 'message', data: { type: 'refetchEvaluation', etag: expect.any(String), lastModified: expect.any(Number) } });
      expect(two.id).not.toBe(one.id);
      expect(Math.abs(two.data.lastModified - Date.now() / 1000)).toBeLessThan(120);
      expect(refetches(stream)).toHaveLength(2);

      // The re-fetch the provider makes: the announced configuration is here, so fresh content, then 304.
      const query = `?flagConfigEtag=${encodeURIComponent(two.data.etag)}&flagConfigLastModified=${two.data.lastModified}`;
      const refetched = await bulk({ token: fx.readToken, query, headers: { 'if-none-match': first.headers.get('etag')! } });
      expect(refetched.status).toBe(200);
      expect(refetched.headers.get('etag')).not.toBe(first.headers.get('etag'));
      const unchanged = await bulk({ token: fx.readToken, query, headers: { 'if-none-match': refetched.headers.get('etag')! } });
      expect(unchanged.status).toBe(304);

      // Last-Event-ID resumes after the first change: the second is replayed.
      const resumed = await openRaw(first.body.eventStreams[0].url, { 'last-event-id': one.id! });
      try {
        await eventually(async () => refetches(resumed).length >= 1);
        expect(refetches(resumed)[0]).toMatchObject({ id: two.id, data: { etag: two.data.etag } });
      } finally {
        resumed.close();
      }
    } finally {
      stream.close();
    }
  });

  it('starts with a refetchEvaluation when the flags changed between the bulk answer and the stream', async () => {
    const flag = await servedFlag();
    const url = await streamUrl({ token: fx.readToken });
    const etagBefore = new URL(url).searchParams.get('etag');
    expect((await toggle(flag.key, false)).status).toBe(200);
    await eventually(async () => new URL((await bulk({ token: fx.readToken })).body.eventStreams[0].url).searchParams.get('etag') !== etagBefore);
    const stream = await openRaw(url);
    try {
      await eventually(async () => refetches(stream).length >= 1);
      expect(refetches(stream)[0].data.etag).not.toBe(etagBefore);
    } finally {
      stream.close();
    }
  });

  it('is refused without a valid channel token for its service and environment (401/403/400), and the channel token opens nothing else', async () => {
    const url = new URL(await streamUrl({ token: fx.readToken }));
    const channel = url.searchParams.get('channel')!;
    const withParam = (name: string, value: string | null) => {
      const u = new URL(url);
      if (value === null) u.searchParams.delete(name);
      else u.searchParams.set(name, value);
      return u.href;
    };
    const get = async (href: string, headers: Record<string, string> = {}) => {
      const res = await fetch(href, { headers });
      const text = await res.text();
      return { status: res.status, text };
    };

    expect((await get(withParam('channel', null))).status).toBe(401);
    // Tampered: another payload under the same signature, or a broken signature.
    const [h, p, s] = channel.split('.');
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...payload, svc: other.serviceId })).toString('base64url');
    expect((await get(withParam('channel', `${h}.${forged}.${s}`))).status).toBe(401);
    expect((await get(withParam('channel', `${h}.${p}.${s.slice(0, -2)}${s.endsWith('AA') ? 'BB' : 'AA'}`))).status).toBe(401);
    // Expired: signed with the service's own key, past its lifetime.
    const codec = await JwtCodec.create(
      { dataDir: app.platform.config.dataDir, issuer: app.platform.config.JWT_ISSUER, audience: app.platform.config.JWT_AUDIENCE },
      app.platform.logger,
    );
    const past = Math.floor(Date.now() / 1000) - 3600;
    const expired = await codec.signOther(`${codec.audience}/ofrep-events`, { sub: payload.sub, tkt: payload.tkt, prj: payload.prj, svc: payload.svc, env: payload.env, scope: payload.scope }, past - 600, past);
    expect((await get(withParam('channel', expired))).status).toBe(401);
    // A project access token is no channel token.
    const jwt = await tokenWithId(fx.projectId, { scopes: ['read'] });
    expect((await get(withParam('channel', jwt.value))).status).toBe(401);

    // Service A's channel does not open service B's stream, nor another environment's.
    expect((await get(withParam('serviceId', other.serviceId))).status).toBe(403);
    expect((await get(withParam('environment', 'production'))).status).toBe(403);

    // Malformed and oversized input.
    expect((await get(withParam('environment', 'qa'))).status).toBe(400);
    expect((await get(withParam('channel', 'x'.repeat(5000)))).status).toBe(400);
    expect((await get(withParam('serviceId', 's'.repeat(300)))).status).toBe(400);
    // A personal token on the stream is refused like on every SDK route.
    const pat = await personalToken(app, fx.owner, 'read');
    expect((await get(url.href, { authorization: `Bearer ${pat}` })).status).toBe(403);

    // As a bearer it is an unknown credential everywhere: 401.
    const asBearer = { authorization: `Bearer ${channel}`, 'content-type': 'application/json', 'x-service-id': fx.serviceId };
    for (const [base, method, p2, body] of [
      [app.urls.data, 'POST', '/api/ofrep/v1/evaluate/flags', { context: {} }],
      [app.urls.data, 'POST', '/api/flags/evaluate', { flagKey: 'x', serviceId: fx.serviceId, context: {} }],
      [app.urls.data, 'GET', `/api/flags/stream?serviceId=${fx.serviceId}`, undefined],
      [app.urls.control, 'GET', '/api/users/me', undefined],
      [app.urls.control, 'GET', `/api/flags?serviceId=${fx.serviceId}&environment=development`, undefined],
    ] as const) {
      const res = await fetch(`${base}${p2}`, { method, headers: asBearer, body: body === undefined ? undefined : JSON.stringify(body) });
      expect({ p2, status: res.status }).toEqual({ p2, status: 401 });
      await res.text();
    }
  });

  it('ends when the API token it was issued for is revoked, and opens no more', async () => {
    for (const kind of [{ permissions: { read: true } }, { scopes: ['read'] }]) {
      const token = await tokenWithId(fx.projectId, kind);
      const url = await streamUrl({ token: token.value });
      const stream = await openRaw(url);
      expect(stream.status).toBe(200);
      const revoked = await fx.owner.request('DELETE', `/api/projects/${fx.projectId}/tokens/${token.id}`);
      expect(revoked.status).toBe(204);
      // About 10 s; the watch checks every 5 s (docs/limits.md).
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([stream.ended, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('stream still open')), 20_000)))]);
      clearTimeout(timer);
      const again = await fetch(url);
      expect(again.status).toBe(401);
      await again.text();
    }
  });
});

describe('freshness of bulk re-fetches', () => {
  it('never answers 304 for a configuration this replica has not applied (waits, then answers what it has)', async () => {
    await servedFlag();
    // The configuration this replica serves, once it holds still: on a loaded machine a change
    // made earlier in the file may still be arriving, and each one moves the ETag.
    const etag = await settledEtag();
    const future = Math.floor(Date.now() / 1000) + 3600;
    const ahead = await bulk({ token: fx.readToken, query: `?flagConfigEtag=W%2F%22unseen%22&flagConfigLastModified=${future}`, headers: { 'if-none-match': etag } });
    expect(ahead.status).toBe(200);
    // It answered what it has: the same configuration, unless one more change arrived meanwhile.
    expect([etag, await settledEtag()]).toContain(ahead.headers.get('etag'));
    // An ISO date-time works as well; anything else is a 400.
    const iso = await bulk({ token: fx.readToken, query: `?flagConfigLastModified=${new Date((future + 60) * 1000).toISOString()}`, headers: { 'if-none-match': etag } });
    expect(iso.status).toBe(200);
    for (const bad of ['yesterday', '-5', '2026-13-45T00:00:00Z', '1'.repeat(20)]) {
      const res = await bulk({ token: fx.readToken, query: `?flagConfigLastModified=${encodeURIComponent(bad)}` });
      expect({ bad, status: res.status }).toEqual({ bad, status: 400 });
    }
    expect((await bulk({ token: fx.readToken, query: `?flagConfigEtag=${'e'.repeat(300)}` })).status).toBe(400);
    // An older lastModified is applied already: 304 as usual.
    expect((await bulk({ token: fx.readToken, query: '?flagConfigLastModified=1000', headers: { 'if-none-match': await settledEtag() } })).status).toBe(304);
  });
});

describe('a replica that has not applied an announced change', () => {
  let behind: TestApp;
  let flagKey: string;
  beforeAll(async () => {
    flagKey = (await servedFlag()).key;
    // Same database, but its own bus (another Redis prefix) and no reconcile: it never hears of
    // the changes made after it started, as a replica whose bus is behind.
    behind = await startTestApp({
      DATABASE_URL: app.databaseUrl,
      CLICKHOUSE_DATABASE: app.platform.config.CLICKHOUSE_DATABASE,
      ROLES: 'data',
      EVAL_SNAPSHOT_RECONCILE_MS: '0',
      RATE_LIMIT_PER_IP: '100000',
    });
  });
  afterAll(() => behind?.stop());

  it('does not answer 304 for it: it waits, then answers what it has', async () => {
    const before = await bulk({ base: behind.urls.data, token: fx.readToken });
    expect(before.status).toBe(200);
    const url = await streamUrl({ token: fx.readToken });
    const stream = await openRaw(url);
    try {
      expect((await toggle(flagKey, false)).status).toBe(200);
      await eventually(async () => refetches(stream).length >= 1);
      const { data } = refetches(stream)[0];
      const query = `?flagConfigEtag=${encodeURIComponent(data.etag)}&flagConfigLastModified=${data.lastModified}`;
      // The replica that announced it has it: a client already holding it gets 304 there.
      const current = await bulk({ token: fx.readToken });
      expect((await bulk({ token: fx.readToken, query, headers: { 'if-none-match': current.headers.get('etag')! } })).status).toBe(304);
      // The one behind answers its content again, with 200: the client keeps asking on the next change.
      const refetched = await bulk({ base: behind.urls.data, token: fx.readToken, query, headers: { 'if-none-match': before.headers.get('etag')! } });
      expect(refetched.status).toBe(200);
      expect(refetched.headers.get('etag')).toBe(before.headers.get('etag'));
      expect(refetched.body.flags.find((f: { key: string }) => f.key === flagKey)).toMatchObject({ value: true, reason: 'TARGETING_MATCH' });
      // Without the announcement it is an ordinary conditional request.
      expect((await bulk({ base: behind.urls.data, token: fx.readToken, headers: { 'if-none-match': before.headers.get('etag')! } })).status).toBe(304);
    } finally {
      stream.close();
    }
  });
});

describe('CORS for a page on another origin', () => {
  const origin = 'https://shop.example';

  it('allows the preflight of the bulk POST, exposes ETag and Last-Modified, and lets EventSource open the stream', async () => {
    const preflight = await fetch(`${app.urls.data}/api/ofrep/v1/evaluate/flags`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,if-none-match,x-service-id' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-methods')).toMatch(/POST/);
    const allowed = preflight.headers.get('access-control-allow-headers')!.toLowerCase();
    for (const h of ['authorization', 'content-type', 'if-none-match', 'x-service-id', 'last-event-id']) expect(allowed).toContain(h);

    const res = await bulk({ token: fx.readToken, headers: { origin } });
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    const exposed = res.headers.get('access-control-expose-headers')!.toLowerCase();
    expect(exposed).toContain('etag');
    expect(exposed).toContain('last-modified');

    const streamPreflight = await fetch(res.body.eventStreams[0].url, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'last-event-id' },
    });
    expect(streamPreflight.status).toBe(204);
    const stream = await openRaw(res.body.eventStreams[0].url, { origin });
    try {
      expect(stream.status).toBe(200);
    } finally {
      stream.close();
    }
  });
});

describe('across two replicas', () => {
  let replica: TestApp;
  beforeAll(async () => {
    // Replicas share the signing key (JWT_PRIVATE_KEY is required in production).
    const key = fs.readFileSync(path.join(app.platform.config.dataDir, 'keys', 'jwt-ed25519.pem'), 'utf8');
    replica = await startTestApp(
      {
        DATABASE_URL: app.databaseUrl,
        REDIS_KEY_PREFIX: app.platform.config.REDIS_KEY_PREFIX,
        CLICKHOUSE_DATABASE: app.platform.config.CLICKHOUSE_DATABASE,
        ROLES: 'data',
        JWT_PRIVATE_KEY: key,
      },
      { logger: createLogger('info', logSink) },
    );
  });
  afterAll(() => replica?.stop());

  it('a web client on one replica sees a change made through another', async () => {
    const flag = await servedFlag();
    await untilEvaluated(replica, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.reason === 'TARGETING_MATCH', { token: fx.readToken, listener: 'data' });
    const { client } = await webClient(replica.urls.data, fx.readToken);
    expect(client.getBooleanValue(flag.key, false)).toBe(true);
    await toggleAndSee(client, flag.key, false);
  });

  it('gives a change the same stream id on every replica, and a channel of one opens the stream on the other', async () => {
    const flag = await servedFlag();
    const url = await streamUrl({ token: fx.readToken });
    const here = await openRaw(url);
    const there = await openRaw(url.replace(app.urls.data, replica.urls.data));
    try {
      expect(there.status).toBe(200);
      expect((await toggle(flag.key, false)).status).toBe(200);
      await eventually(async () => refetches(here).length >= 1 && refetches(there).length >= 1);
      expect(refetches(there)[0].id).toBe(refetches(here)[0].id);
      expect(refetches(there)[0].data).toEqual(refetches(here)[0].data);
    } finally {
      here.close();
      there.close();
    }
  });
});

describe('OpenAPI', () => {
  it('documents the event stream and the re-fetch parameters of the bulk route', async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    expect(doc.paths['/api/ofrep/v1/event-stream'].get.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(['serviceId', 'environment', 'channel', 'etag', 'lastEventId']),
    );
    const bulkRoute = doc.paths['/api/ofrep/v1/evaluate/flags'].post;
    expect(bulkRoute.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(['flagConfigEtag', 'flagConfigLastModified']));
  });
});

describe('logs', () => {
  it('never hold a channel token, even for a stream URL that reaches the Express logger', async () => {
    const url = new URL(await streamUrl({ token: fx.readToken }));
    // The ingest listener has no OFREP: Express answers 404 and logs the request.
    const res = await fetch(`${app.urls.ingest}${url.pathname}${url.search}`);
    expect(res.status).toBe(404);
    await eventually(async () => logLines.some((l) => l.includes('/api/ofrep/v1/event-stream')));
    expect(issuedChannels.size).toBeGreaterThan(3);
    const leaks = logLines.filter((line) => [...issuedChannels].some((c) => line.includes(c) || line.includes(c.split('.')[2])));
    expect(leaks).toEqual([]);
  });
});
