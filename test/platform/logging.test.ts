import { Writable } from 'node:stream';
import { createLogger } from '../../api/infra/logger';
import { startTestApp, type TestApp } from '../support/harness';

const lines: string[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    lines.push(...chunk.toString().split('\n').filter(Boolean));
    done();
  },
});

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({}, { logger: createLogger('debug', sink) });
});
afterAll(() => app?.stop());

describe('structured logs', () => {
  it('log one JSON line per request with a request id, and no secrets', async () => {
    const user = await app.signup();
    await app.request('POST', '/api/auth/login', { body: { email: user.email, password: user.password } });
    await app.request('GET', '/api/users/me', { token: 'fgp_' + 'a'.repeat(64) });
    await app.request('GET', '/api/users/me', { cookie: user.cookie, headers: { 'x-request-id': 'trace-abc-123' } });

    const records = lines.map((l) => JSON.parse(l));
    const requests = records.filter((r) => r.msg === 'request completed');
    expect(requests.length).toBeGreaterThanOrEqual(4);
    for (const r of requests) expect(r.req.id).toEqual(expect.any(String));
    expect(requests.some((r) => r.req.id === 'trace-abc-123')).toBe(true);

    const all = lines.join('\n');
    expect(all).not.toContain(user.password);
    expect(all).not.toContain('a'.repeat(64));
    expect(all).not.toContain(user.cookie.split('=')[1]);
  });

  it('echoes the request id and makes one up when the client sends none or a bad one', async () => {
    const given = await app.request('GET', '/api/health', { headers: { 'x-request-id': 'my-id-1' } });
    expect(given.headers.get('x-request-id')).toBe('my-id-1');
    const bad = await app.request('GET', '/api/health', { headers: { 'x-request-id': 'bad id with spaces\u00e9' } });
    expect(bad.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});
