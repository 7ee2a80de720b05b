import net from 'node:net';
import { startTestApp, type TestApp } from '../support/harness';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ HTTP_HEADERS_TIMEOUT_MS: '800', HTTP_REQUEST_TIMEOUT_MS: '1500' });
});
afterAll(() => app?.stop());

/** Opens a connection, sends `parts` with pauses, and returns whatever the server answers. */
function trickle(parts: string[], pauseMs: number): Promise<string> {
  const { hostname, port } = new URL(app.urls.control);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let data = '';
    let i = 0;
    const timer = setInterval(() => {
      if (i < parts.length && !socket.destroyed) socket.write(parts[i++]);
    }, pauseMs);
    socket.on('data', (d) => (data += d.toString()));
    // A safety net for a server that never answers; cleared on close so no timer outlives the test.
    const giveUp = setTimeout(() => socket.destroy(), 10_000);
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve(data);
    });
    socket.on('error', () => undefined);
  });
}

describe('slow clients', () => {
  it('gets 408 in the envelope when the headers never finish, and the server keeps serving', async () => {
    const answer = await trickle(['GET /api/health HTTP/1.1\r\n', 'Host: x\r\n', 'X-A: 1\r\n', 'X-B: 2\r\n', 'X-C: 3\r\n', 'X-D: 4\r\n'], 400);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(answer).toContain('"error":"Request Timeout"');
    expect((await app.request('GET', '/api/health')).status).toBe(200);
  });

  it('gets 408 when a body trickles in slower than the request timeout', async () => {
    const body = JSON.stringify({ email: 'slow@example.com', password: 'long enough' });
    const head = `POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const answer = await trickle([head, ...body.match(/.{1,4}/g)!], 300);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });
});
