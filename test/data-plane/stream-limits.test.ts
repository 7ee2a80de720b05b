import http from 'node:http';
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, projectToken, untilEvaluated, type DataPlaneFixture } from './support';

/**
 * Open streams are capped per IP, per credential and per service (429, or
 * RESOURCE_EXHAUSTED on the Connect EventStream), listeners cap their connections, and a client
 * that stops reading is dropped without the server buffering what it does not read.
 */

let app: TestApp;
let fx: DataPlaneFixture;

const STALL_MS = 3_000;

beforeAll(async () => {
  app = await startTestApp({
    // Clients are told apart by X-Forwarded-For.
    TRUST_PROXY: '1',
    STREAM_MAX_PER_IP: '3',
    STREAM_MAX_PER_CREDENTIAL: '2',
    STREAM_MAX_PER_SERVICE: '4',
    STREAM_STALL_TIMEOUT_MS: String(STALL_MS),
    // No heartbeat during a test: only the stall rule may drop a client.
    STREAM_HEARTBEAT_MS: '600000',
  });
  fx = await createFixture(app);
});
afterAll(() => app?.stop());

let ipCounter = 0;
const nextIp = () => `10.9.${Math.floor(++ipCounter / 250)}.${(ipCounter % 250) + 1}`;

interface Opened {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** What arrived until the stream was seen open (or the whole body of a refusal). */
  text: string;
  close(): void;
}

/** GET an SSE stream from `ip`; resolves on the first bytes of a 200, or with the whole body of anything else. */
function sse(serviceId: string, opts: { ip: string; token?: string; listener?: 'control' | 'data' }): Promise<Opened> {
  return streamAt(`${app.urls[opts.listener ?? 'data']}/api/flags/stream?serviceId=${serviceId}&environment=development`, opts);
}

function streamAt(url: string, opts: { ip: string; token?: string }): Promise<Opened> {
  const headers: Record<string, string> = { accept: 'text/event-stream', 'x-forwarded-for': opts.ip };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      const opened = () => ({ status: res.statusCode!, headers: res.headers, text, close: () => req.destroy() });
      res.on('data', (chunk: string) => {
        text += chunk;
        if (res.statusCode === 200) resolve(opened());
      });
      res.on('end', () => resolve(opened()));
    });
    req.on('error', reject);
  });
}

/** A Connect (JSON) EventStream call from `ip`: resolves on its first message, a refusal included. */
function eventStream(serviceId: string, opts: { ip: string; token?: string }): Promise<Opened> {
  const json = Buffer.from(JSON.stringify({ serviceId, environment: 'development' }));
  const envelope = Buffer.alloc(5 + json.length);
  envelope.writeUInt32BE(json.length, 1);
  json.copy(envelope, 5);
  const headers: Record<string, string> = { 'content-type': 'application/connect+json', 'connect-protocol-version': '1', 'x-forwarded-for': opts.ip };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  return new Promise((resolve, reject) => {
    const req = http.request(`${app.urls.data}/api/connect/flags.v1.EvaluationService/EventStream`, { method: 'POST', agent: false, headers }, (res) => {
      let text = '';
      res.setEncoding('latin1');
      const opened = () => ({ status: res.statusCode!, headers: res.headers, text, close: () => req.destroy() });
      res.on('data', (chunk: string) => {
        text += chunk;
        resolve(opened());
      });
      res.on('end', () => resolve(opened()));
    });
    req.on('error', reject);
    req.end(envelope);
  });
}

function expectRefused(res: Opened, what: RegExp) {
  expect(res.status).toBe(429);
  const body = JSON.parse(res.text);
  expect(body).toEqual({ error: 'Too Many Requests', message: expect.stringMatching(what) });
  expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
}

/** Retries `open` until it is let in again (a slot frees once the server saw the client go). */
const untilAdmitted = (open: () => Promise<Opened>) =>
  eventually(async () => {
    const res = await open();
    if (res.status === 200 && !res.text.includes('resource_exhausted')) return res;
    res.close();
    return undefined;
  });

describe('open stream caps', () => {
  it('caps streams per IP across both listeners and the Connect EventStream, and frees the slot on disconnect', async () => {
    const ip = nextIp();
    const open = [
      await sse(fx.serviceId, { ip }),
      await sse(fx.serviceId, { ip, listener: 'control' }),
      await eventStream(fx.serviceId, { ip }),
    ];
    for (const s of open) expect(s.status).toBe(200);
    expectRefused(await sse(fx.serviceId, { ip }), /3 per IP address/);
    expectRefused(await sse(fx.serviceId, { ip, listener: 'control' }), /per IP address/);
    const refusedRpc = await eventStream(fx.serviceId, { ip });
    expect(refusedRpc.text).toContain('"code":"resource_exhausted"');
    refusedRpc.close();
    // Another address is not affected.
    const other = await sse(fx.serviceId, { ip: nextIp() });
    expect(other.status).toBe(200);
    other.close();

    open[0].close();
    const again = await untilAdmitted(() => sse(fx.serviceId, { ip }));
    again.close();
    open[1].close();
    open[2].close();
  });

  it('caps streams per credential whatever the address', async () => {
    const a = await sse(fx.serviceId, { ip: nextIp(), token: fx.readToken });
    const b = await eventStream(fx.serviceId, { ip: nextIp(), token: fx.readToken });
    expect(a.status).toBe(200);
    expect(b.text).not.toContain('resource_exhausted');
    expectRefused(await sse(fx.serviceId, { ip: nextIp(), token: fx.readToken }), /2 per credential/);
    // The same user's session is another credential.
    const session = await sessionStream(fx.serviceId, fx.owner.cookie);
    expect(session.status).toBe(200);
    session.close();

    b.close();
    const again = await untilAdmitted(() => sse(fx.serviceId, { ip: nextIp(), token: fx.readToken }));
    again.close();
    a.close();
  });

  it('counts an OFREP event stream against the API token its channel was issued for, and per IP', async () => {
    const token = await projectToken(fx.owner, fx.projectId, { read: true });
    const bulk = await fetch(`${app.urls.data}/api/ofrep/v1/evaluate/flags`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-service-id': fx.serviceId, 'x-forwarded-for': nextIp() },
      body: JSON.stringify({ context: { targetingKey: 'u' } }),
    });
    const url = ((await bulk.json()) as { eventStreams: { url: string }[] }).eventStreams[0].url;
    const ofrep = await streamAt(url, { ip: nextIp() });
    const plain = await sse(fx.serviceId, { ip: nextIp(), token });
    expect(ofrep.status).toBe(200);
    expect(plain.status).toBe(200);
    // The channel URL carries no bearer, yet its stream holds one of the token's two slots.
    expectRefused(await streamAt(url, { ip: nextIp() }), /2 per credential/);
    plain.close();
    const again = await untilAdmitted(() => streamAt(url, { ip: nextIp() }));
    ofrep.close();
    again.close();

    // Per IP as every stream: an address with three streams open opens no OFREP stream either.
    const ip = nextIp();
    const three = [await sse(fx.serviceId, { ip }), await sse(fx.serviceId, { ip }), await sse(fx.serviceId, { ip })];
    for (const s of three) expect(s.status).toBe(200);
    expectRefused(await streamAt(url, { ip }), /3 per IP address/);
    for (const s of three) s.close();
  });

  it('caps streams per service (credentialed and anonymous callers counted apart), and frees the slot on disconnect', async () => {
    const svc = await createFixture(app);
    const anonymous: Opened[] = [];
    for (let i = 0; i < 4; i++) anonymous.push(await sse(svc.serviceId, { ip: nextIp() }));
    for (const s of anonymous) expect(s.status).toBe(200);
    expectRefused(await sse(svc.serviceId, { ip: nextIp() }), /4 per service/);
    // Anonymous callers do not take the slots of the service's own clients.
    const members = [
      await sse(svc.serviceId, { ip: nextIp(), token: svc.readToken }),
      await sse(svc.serviceId, { ip: nextIp(), token: svc.readToken }),
      await sessionStream(svc.serviceId, svc.viewer.cookie),
      await sessionStream(svc.serviceId, svc.viewer.cookie),
    ];
    for (const s of members) expect(s.status).toBe(200);
    expectRefused(await sessionStream(svc.serviceId, svc.owner.cookie), /4 per service/);
    const refusedRpc = await eventStream(svc.serviceId, { ip: nextIp(), token: await projectToken(svc.owner, svc.projectId, { read: true }) });
    expect(refusedRpc.text).toContain('"code":"resource_exhausted"');
    refusedRpc.close();

    members[2].close();
    (await untilAdmitted(() => sessionStream(svc.serviceId, svc.owner.cookie))).close();
    anonymous[0].close();
    (await untilAdmitted(() => sse(svc.serviceId, { ip: nextIp() }))).close();
    for (const s of [...anonymous, ...members]) s.close();
  });
});

function sessionStream(serviceId: string, cookie: string): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${app.urls.control}/api/flags/stream?serviceId=${serviceId}&environment=development`,
      { agent: false, headers: { cookie, 'x-forwarded-for': nextIp() } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        const opened = () => ({ status: res.statusCode!, headers: res.headers, text, close: () => req.destroy() });
        res.on('data', (chunk: string) => {
          text += chunk;
          if (res.statusCode === 200) resolve(opened());
        });
        res.on('end', () => resolve(opened()));
      },
    );
    req.on('error', reject);
  });
}

describe('HTTP_MAX_CONNECTIONS', () => {
  let small: TestApp;
  beforeAll(async () => {
    small = await startTestApp({ HTTP_MAX_CONNECTIONS: '3', ROLES: 'data' });
  });
  afterAll(() => small?.stop());

  /** A raw keep-alive connection answering one health request, or null when the server drops it. */
  function connection(): Promise<net.Socket | null> {
    const { hostname, port } = new URL(small.urls.data);
    return new Promise((resolve) => {
      const socket = net.connect(Number(port), hostname);
      let data = '';
      socket.on('data', (d) => {
        data += d.toString();
        if (data.includes('\r\n\r\n') && data.includes('"status"')) resolve(socket);
      });
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(null));
      socket.write('GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n');
    });
  }

  it('sets server.maxConnections on each listener from the configuration', async () => {
    const held = [await connection(), await connection(), await connection()];
    expect(held.every((s) => s !== null)).toBe(true);
    expect(await connection()).toBeNull();
    held[0]!.destroy();
    const next = await eventually(() => connection());
    expect(next).not.toBeNull();
    for (const s of [...held, next]) s?.destroy();
  });
});

/** Node's full GC, for memory figures that do not depend on when the collector last ran. */
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

async function memory() {
  for (let i = 0; i < 2; i++) {
    await new Promise((r) => setTimeout(r, 100));
    gc();
  }
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed + m.external };
}
const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

describe('slow readers and large replays', () => {
  const BIG_FLAGS = 100;
  const BLOB = 200_000;
  let big: DataPlaneFixture;
  let bigKeys: string[];
  let marker: string;

  beforeAll(async () => {
    big = await createFixture(app);
    marker = (await createFlag(big.owner, big.serviceId, { isPublic: true, enabled: false })).key;
    bigKeys = [];
    for (let i = 0; i < BIG_FLAGS; i++) {
      const flag = await createFlag(big.owner, big.serviceId, { type: 'object', isPublic: true, enabled: true, defaultValue: { n: i, blob: 'x'.repeat(BLOB) } });
      bigKeys.push(flag.key);
    }
    await untilEvaluated(app, { flagKey: bigKeys[BIG_FLAGS - 1], serviceId: big.serviceId }, (r) => r.value?.n === BIG_FLAGS - 1);
  });

  /** A raw SSE request that resumes from an unknown id (so it replays every flag) and never reads. */
  function nonReader(ip: string): net.Socket {
    const { hostname, port } = new URL(app.urls.data);
    const socket = net.connect(Number(port), hostname);
    socket.pause();
    socket.on('error', () => undefined);
    socket.write(
      `GET /api/flags/stream?serviceId=${big.serviceId}&environment=development HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: ${ip}\r\nLast-Event-ID: gone\r\n\r\n`,
    );
    return socket;
  }

  /** Streams of a kind that ended as slow clients, from the management listener. */
  async function slowClientEnds(kind: string): Promise<number> {
    const text = await (await fetch(`${app.running.urls.management}/metrics`)).text();
    const series = `flagship_stream_disconnects_total{kind="${kind}",reason="slow_client"} `;
    return Number(text.split('\n').find((line) => line.startsWith(series))?.slice(series.length));
  }

  it('writes a multi-MB replay to a client that does not read only as far as it reads, then drops it', async () => {
    const hub = app.platform.evaluation!.hub;
    // Streams of earlier tests are gone (their closing is seen asynchronously).
    await eventually(async () => hub.size === 0);
    const base = hub.size;
    const droppedBefore = await slowClientEnds('sse');
    const before = await memory();
    const readers = [nonReader(nextIp()), nonReader(nextIp()), nonReader(nextIp())];
    await eventually(async () => hub.size === base + 3, 15_000, 20);
    // While they are open (the stall rule needs STALL_MS): what the server holds for them.
    await new Promise((r) => setTimeout(r, STALL_MS / 3));
    const during = await memory();
    const growth = during.heap - before.heap;
    console.log(
      `3 non-reading clients of a ${mb(BIG_FLAGS * BLOB)} replay: heap+external ${mb(before.heap)} -> ${mb(during.heap)} (+${mb(growth)}), RSS +${mb(during.rss - before.rss)}`,
    );
    expect(growth).toBeLessThan(3 * 3 * 1024 * 1024);
    // Dropped once they stall, and their slots are free again.
    await eventually(async () => hub.size === base, 30_000, 50);
    // Counted as slow clients (docs/operations.md#metrics).
    expect(await slowClientEnds('sse')).toBe(droppedBefore + 3);
    for (const r of readers) r.destroy();
  });

  it('sends a large replay complete and in order to a client that reads, with later changes after it', async () => {
    const controller = new AbortController();
    const res = await fetch(`${app.urls.data}/api/flags/stream?serviceId=${big.serviceId}&environment=development`, {
      headers: { Accept: 'text/event-stream', 'Last-Event-ID': 'gone', 'X-Forwarded-For': nextIp() },
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let toggled = false;
    // A reader that keeps up at about 8 MB/s: the replay takes a few seconds to arrive.
    const pause = (bytes: number) => new Promise((r) => setTimeout(r, bytes / 8_000));
    while (!text.includes('"event":"flag.toggled"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (!toggled) {
        toggled = true;
        expect((await big.owner.request('POST', `/api/flags/${marker}/toggle?serviceId=${big.serviceId}&environment=development`, { enabled: true })).status).toBe(200);
      }
      await pause(value.length);
    }
    controller.abort();
    const payloads = text
      .split('\n\n')
      .filter((f) => f.includes('data: '))
      .map((f) => JSON.parse(f.split('\n').find((l) => l.startsWith('data: '))!.slice(6)));
    expect(payloads[0].type).toBe('connected');
    const seen = payloads.filter((p) => p.type === 'flag-update' && bigKeys.includes(p.flagKey));
    expect(seen.map((p) => p.flagKey).sort()).toEqual([...bigKeys].sort());
    expect(seen.every((p) => p.flag.defaultValue.blob.length === BLOB)).toBe(true);
    // Each flag once, and the change made meanwhile after the whole replay.
    expect(seen).toHaveLength(BIG_FLAGS);
    const lastBig = payloads.lastIndexOf(seen[seen.length - 1]);
    const live = payloads.findIndex((p) => p.flagKey === marker && p.event === 'flag.toggled');
    expect(live).toBeGreaterThan(lastBig);
    expect(payloads[live].flag.enabled).toBe(true);
  });

  it('drops an EventStream client that does not read while changes keep coming', async () => {
    const hub = app.platform.evaluation!.hub;
    // Streams of earlier tests are gone (their closing is seen asynchronously).
    await eventually(async () => hub.size === 0);
    const base = hub.size;
    const droppedBefore = await slowClientEnds('connect');
    const json = Buffer.from(JSON.stringify({ serviceId: big.serviceId, environment: 'development' }));
    const head = Buffer.alloc(5);
    head.writeUInt32BE(json.length, 1);
    const { hostname, port } = new URL(app.urls.data);
    const socket = net.connect(Number(port), hostname);
    socket.pause();
    socket.on('error', () => undefined);
    socket.write(
      `POST /api/connect/flags.v1.EvaluationService/EventStream HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: ${nextIp()}\r\n` +
        `Content-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\nContent-Length: ${5 + json.length}\r\n\r\n`,
    );
    socket.write(Buffer.concat([head, json]));
    await eventually(async () => hub.size === base + 1, 15_000, 20);
    // About 12 MB of updates: far more than the socket buffers hold.
    const before = await memory();
    for (let i = 0; i < 60 && hub.size > base; i++) {
      expect((await big.owner.request('POST', `/api/flags/${bigKeys[0]}/toggle?serviceId=${big.serviceId}&environment=development`, {})).status).toBe(200);
    }
    const during = await memory();
    console.log(`1 non-reading EventStream client under 60 updates of ${mb(BLOB)}: heap+external +${mb(during.heap - before.heap)}, RSS +${mb(during.rss - before.rss)}`);
    await eventually(async () => hub.size === base, 30_000, 50);
    expect(await slowClientEnds('connect')).toBe(droppedBefore + 1);
    socket.destroy();
  });
});
