import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { closeIdleKeepAlive } from '../../api/http/idle-connections';

const IDLE_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let server: http.Server;
let port: number;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const delay = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('delay') ?? 0);
    setTimeout(() => res.end('ok'), delay);
  });
  server.keepAliveTimeout = 0;
  closeIdleKeepAlive(server, IDLE_MS);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** A raw client connection: what it received, and whether the server closed it. */
function connect() {
  const socket = net.connect(port, '127.0.0.1');
  const state = { received: '', closed: false, closedAt: 0, lastDataAt: 0, socket };
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    state.received += chunk;
    state.lastDataAt = Date.now();
  });
  socket.on('close', () => {
    state.closed = true;
    state.closedAt = Date.now();
  });
  socket.on('error', () => undefined);
  return state;
}

const request = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
const answers = (received: string) => received.split('HTTP/1.1 200').length - 1;

async function until(condition: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!condition() && Date.now() < end) await sleep(10);
  return condition();
}

/** A connection answered once, then given a request that takes `delayMs` to answer, until that answer. */
async function answeredThenSlow(delayMs: number) {
  const c = connect();
  c.socket.write(request('/'));
  expect(await until(() => answers(c.received) === 1, 2_000)).toBe(true);
  c.socket.write(request(`/?delay=${delayMs}`));
  expect(await until(() => answers(c.received) === 2, 20 * IDLE_MS)).toBe(true);
  return c;
}

describe('closeIdleKeepAlive', () => {
  it('closes an answered connection once it has been idle for a sweep, and not before', async () => {
    const c = connect();
    c.socket.write(request('/'));
    expect(await until(() => answers(c.received) === 1, 2_000)).toBe(true);
    await sleep(IDLE_MS / 3);
    expect(c.closed).toBe(false);
    expect(await until(() => c.closed, 10 * IDLE_MS)).toBe(true);
  });

  it('keeps a connection that goes on asking, across many sweeps', async () => {
    const c = connect();
    for (let i = 0; i < 12; i++) {
      c.socket.write(request('/'));
      await sleep(IDLE_MS / 3);
    }
    expect(await until(() => answers(c.received) === 12, 2_000)).toBe(true);
    expect(c.closed).toBe(false);
    c.socket.destroy();
  });

  it('never closes a connection while its response is under way', async () => {
    // The second request takes several sweeps to answer.
    const c = await answeredThenSlow(4 * IDLE_MS);
    expect(c.closed).toBe(false);
    c.socket.destroy();
  });

  it('counts the idle time from the end of the last answer, not from its request', async () => {
    // Read before a sweep, answered sweeps later: the client may reuse it for a whole sweep more.
    const c = await answeredThenSlow(2.5 * IDLE_MS);
    expect(await until(() => c.closed, 10 * IDLE_MS)).toBe(true);
    // Timers may fire a little early on some platforms; a sweep too soon would be a whole interval short.
    expect(c.closedAt - c.lastDataAt).toBeGreaterThanOrEqual(IDLE_MS - 50);
  });

  it('leaves a connection that was never answered to the listener’s own timeouts', async () => {
    const c = connect();
    await sleep(4 * IDLE_MS);
    expect(c.closed).toBe(false);
    // Still usable: its first request is answered.
    c.socket.write(request('/'));
    expect(await until(() => answers(c.received) === 1, 2_000)).toBe(true);
    c.socket.destroy();
  });
});
