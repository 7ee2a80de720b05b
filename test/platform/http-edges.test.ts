import net from 'node:net';
import { startTestApp, type TestApp } from '../support/harness';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ RATE_LIMIT_PER_IP: '40', RATE_LIMIT_WINDOW_SECONDS: '60' });
});
afterAll(() => app?.stop());

function rawRequest(url: string, payload: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(payload));
    let data = '';
    socket.on('data', (d) => (data += d.toString()));
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
    socket.setTimeout(5000, () => socket.destroy(new Error('timeout')));
  });
}

describe('error envelope and limits', () => {
  it('answers unknown routes with a JSON 404 on every listener', async () => {
    for (const listener of ['control', 'data', 'ingest'] as const) {
      const res = await app.request('GET', '/api/does-not-exist', { listener });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'Not Found', message: expect.any(String) });
    }
  });

  it('rejects malformed JSON with 400 and a wrong content type with 415', async () => {
    const bad = await app.request('POST', '/api/auth/login', { rawBody: '{"email": ', headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'Bad Request', message: 'Malformed JSON body' });
    const form = await app.request('POST', '/api/auth/login', { rawBody: 'email=a', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(form.status).toBe(415);
    expect(form.body.error).toBe('Unsupported Media Type');
  });

  it('refuses unknown fields on strict schemas with field details', async () => {
    const res = await app.request('POST', '/api/auth/login', { body: { email: 'a@example.com', password: 'x', admin: true } });
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([{ path: 'body', message: expect.stringContaining('admin') }]);
  });

  it('answers 413 past the route body limit (256 KB default)', async () => {
    const res = await app.request('POST', '/api/auth/login', { body: { email: 'a@example.com', password: 'x'.repeat(300 * 1024) } });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ error: 'Payload Too Large', message: expect.stringContaining('262144') });
  });

  it('answers huge headers with 431 in the envelope and keeps serving', async () => {
    const raw = await rawRequest(app.urls.control, `GET /api/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(raw).toMatch(/^HTTP\/1\.1 431/);
    expect(raw).toContain('"error":"Request Header Fields Too Large"');
    expect((await app.request('GET', '/api/health')).status).toBe(200);
  });

  it('answers garbage on the socket with 400 in the envelope', async () => {
    const raw = await rawRequest(app.urls.control, 'THIS IS NOT HTTP\r\n\r\n');
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    expect(raw).toContain('"error":"Bad Request"');
  });

  it('serves the OpenAPI 3.1 document generated from the route validators', async () => {
    const res = await app.request('GET', '/api/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    const signup = res.body.paths['/api/auth/signup'].post;
    expect(signup.requestBody.content['application/json'].schema.properties.password.minLength).toBe(10);
  });
});

describe('rate limits', () => {
  it('puts the RateLimit headers on every response', async () => {
    const res = await app.request('GET', '/api/health', { listener: 'data' });
    expect(Number(res.headers.get('ratelimit-limit'))).toBe(40);
    expect(Number(res.headers.get('ratelimit-remaining'))).toBeLessThan(40);
    expect(Number(res.headers.get('ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
  });

  it('is shared across replicas (same Redis) and answers 429 past the limit', async () => {
    // A second replica of the same deployment: same database and Redis key prefix.
    const replica = await startTestApp({
      DATABASE_URL: app.databaseUrl,
      REDIS_KEY_PREFIX: app.platform.config.REDIS_KEY_PREFIX,
      RATE_LIMIT_PER_IP: '40',
      RATE_LIMIT_WINDOW_SECONDS: '60',
    });
    try {
      await app.platform.cache.del('rl:ip:127.0.0.1');
      const statuses = await Promise.all(
        Array.from({ length: 60 }, (_, i) => (i % 2 ? app : replica).request('GET', '/api/health', { listener: i % 3 === 0 ? 'data' : 'control' })),
      );
      const counts: Record<number, number> = {};
      for (const r of statuses) counts[r.status] = (counts[r.status] ?? 0) + 1;
      expect(counts).toEqual({ 200: 40, 429: 20 });
      const limited = statuses.filter((r) => r.status === 429);
      expect(limited).toHaveLength(20);
      expect(limited[0].body).toEqual({ error: 'Too Many Requests', message: expect.stringContaining('IP') });
      expect(limited[0].headers.get('ratelimit-remaining')).toBe('0');
      expect(Number(limited[0].headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await replica.stop({ keepDatabase: true });
      await app.platform.cache.del('rl:ip:127.0.0.1');
    }
  });
});

describe('client addresses', () => {
  it('ignores X-Forwarded-For unless TRUST_PROXY names the hops', async () => {
    await app.platform.cache.del('rl:ip:127.0.0.1');
    await app.request('GET', '/api/health', { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(await app.platform.cache.get('rl:ip:203.0.113.9')).toBeNull();
    expect(Number(await app.platform.cache.get('rl:ip:127.0.0.1'))).toBeGreaterThan(0);
  });
});
