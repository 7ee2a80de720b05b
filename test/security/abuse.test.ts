import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { DEMO_SEED_IDS } from '../../api/features/demo/seed';
import { createFixture, createFlag, personalToken, projectToken, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { eventually, startTestApp, type TestApp, type TestResponse } from '../support/harness';
import { expectOfrepBulk, expectOfrepSingle } from '../support/ofrep-schema';

/**
 * Bodies are read only after the caller passed its route's credential
 * policy, compressed bodies are refused, anonymous demo writes get a small body, anonymous
 * callers never spend a service's budget, and per-IP buckets take IPv6 by /64.
 */
const SERVICE_LIMIT = 6;
const IP_LIMIT = 150;
const DEMO = DEMO_SEED_IDS.service;

let app: TestApp;
let fx: DataPlaneFixture;
let other: DataPlaneFixture;

// TRUST_PROXY=1: X-Forwarded-For names the client, so tests can call from other addresses.
beforeAll(async () => {
  app = await startTestApp({ DEMO_SEED: 'true', TRUST_PROXY: '1', RATE_LIMIT_PER_SERVICE: String(SERVICE_LIMIT), RATE_LIMIT_PER_IP: String(IP_LIMIT) });
  fx = await createFixture(app);
  other = await createFixture(app);
});
afterAll(() => app?.stop());

let ipCounter = 0;
/** A fresh IPv4 client, so per-IP budgets and the demo throttle of one test do not reach the next. */
const freshIp = () => ({ 'x-forwarded-for': `10.9.${Math.floor(++ipCounter / 250)}.${ipCounter % 250}` });

/** Passes an answer on after checking it (OFREP answers against the published schema). */
const checked = (check: (res: TestResponse) => void) => (res: TestResponse) => {
  check(res);
  return res;
};

/** 25 KB of gzip that inflates to 25 MB of JSON (under the 25.6 MB bulk limit once inflated). */
const BOMB = gzipSync(Buffer.from(`{"flags":[{}]${' '.repeat(25 * 1024 * 1024)}}`));

/**
 * Sends the headers and only the first half of a body that declares its full length, and
 * resolves with the answer. A server that reads the body first never answers (the rest never
 * comes): the request times out instead.
 */
function halfSent(method: string, path: string, body: Buffer, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const url = new URL(app.urls.control + path);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { 'content-type': 'application/json', 'content-length': String(body.length), ...headers } });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`${method} ${path}: no answer before the body was complete`));
    }, 10_000);
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        clearTimeout(timer);
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
      });
    });
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.write(body.subarray(0, body.length >> 1));
  });
}

const evaluate = (flagKey: string, serviceId: string, token?: string, headers: Record<string, string> = {}) =>
  app.request('POST', '/api/flags/evaluate', { token, headers, body: { flagKey, serviceId, environment: 'development', context: { targetingKey: 'u1' } } });

describe('bodies before credentials', () => {
  const gzip = { 'content-encoding': 'gzip' };

  it('refuses an anonymous gzip bomb to import and bulk with 401 without reading the body', async () => {
    for (const [method, path] of [
      ['POST', '/api/flags/import'],
      ['POST', '/api/flags/bulk'],
      ['DELETE', '/api/flags/bulk'],
    ]) {
      const res = await halfSent(method, path, BOMB, gzip);
      expect(res).toEqual({ status: 401, body: { error: 'Unauthorized', message: expect.any(String) } });
    }
  });

  it('refuses a credential that may not call the route (read-tier personal token, session without CSRF) before reading the body', async () => {
    const pat = await personalToken(app, fx.owner, 'read');
    const refused = await halfSent('POST', '/api/flags/bulk', BOMB, { ...gzip, authorization: `Bearer ${pat}` });
    expect(refused).toEqual({ status: 403, body: { error: 'Forbidden', message: 'Forbidden: personal access token is read-only' } });
    const noCsrf = await halfSent('POST', '/api/flags/import', BOMB, { ...gzip, cookie: fx.owner.cookie });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body.message).toContain('CSRF');
  });

  it('refuses compressed bodies for callers who may send them: 415 on Express and lean routes, Connect accepts no compression', async () => {
    const write = await projectToken(fx.owner, fx.projectId, { write: true });
    for (const [method, path] of [
      ['POST', '/api/flags/import'],
      ['POST', '/api/flags/bulk'],
      ['PATCH', '/api/flags/bulk'],
    ]) {
      const res = await app.request(method, path, { token: write, rawBody: BOMB as unknown as string, headers: { 'content-type': 'application/json', ...gzip } });
      expect([method, path, res.status, res.body]).toEqual([method, path, 415, { error: 'Unsupported Media Type', message: expect.stringContaining('encoding') }]);
    }
    // Anonymous callers of a public route (the demo write) and of the lean evaluation path too.
    const demo = await app.request('PATCH', '/api/flags/bulk', { rawBody: BOMB as unknown as string, headers: { 'content-type': 'application/json', ...gzip, ...freshIp() } });
    expect(demo.status).toBe(415);
    const small = gzipSync(JSON.stringify({ flagKey: 'x', serviceId: fx.serviceId }));
    const lean = await app.request('POST', '/api/flags/evaluate', { rawBody: small as unknown as string, headers: { 'content-type': 'application/json', ...gzip } });
    expect(lean.status).toBe(415);
    // Connect negotiates its own compression and accepts none: refused before the body is read.
    const rpc = await halfSent('POST', '/api/connect/flags.v1.EvaluationService/ResolveBoolean', BOMB, gzip);
    expect(rpc.body).toMatchObject({ code: 'unimplemented' });
  });

  it('limits anonymous demo writes to 1 MB of body while authenticated bulk keeps 25.6 MB', async () => {
    const item = { key: 'px-1', serviceId: DEMO, environment: 'staging', updates: { enabled: true } };
    const padded = (flags: unknown[]) => `{"flags":${JSON.stringify(flags)}${' '.repeat(1100 * 1024)}}`;
    const anonymous = await app.request('PATCH', '/api/flags/bulk', { rawBody: padded([item]), headers: { 'content-type': 'application/json', ...freshIp() } });
    expect(anonymous.status).toBe(413);
    expect(anonymous.body).toEqual({ error: 'Payload Too Large', message: expect.stringContaining(String(1024 * 1024)) });
    // A small demo write still works anonymously.
    const small = await app.request('PATCH', '/api/flags/bulk', { body: { flags: [item] }, headers: freshIp() });
    expect(small.status).toBe(200);

    const flag = await createFlag(fx.owner, fx.serviceId, { type: 'boolean', enabled: false, defaultValue: false });
    const write = await projectToken(fx.owner, fx.projectId, { write: true });
    const update = { key: flag.key, serviceId: fx.serviceId, environment: 'development', updates: { enabled: true } };
    const authenticated = await app.request('PATCH', '/api/flags/bulk', { token: write, rawBody: padded([update]), headers: { 'content-type': 'application/json' } });
    expect(authenticated.status).toBe(200);
  });
});

describe('service budgets and anonymous callers', () => {
  it("does not let anonymous callers or other projects' tokens spend a service's budget", async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { type: 'boolean', enabled: true, defaultValue: true, isPublic: true });
    const attacker = freshIp();
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId, environment: 'development' }, (r) => r.value === true);
    const floods: Promise<TestResponse>[] = [];
    for (let i = 0; i < 3 * SERVICE_LIMIT; i++) {
      floods.push(evaluate(flag.key, fx.serviceId, undefined, attacker));
      floods.push(evaluate(flag.key, fx.serviceId, other.readToken, attacker));
    }
    const ofrepHeaders = { 'x-service-id': fx.serviceId, 'x-environment': 'development', ...attacker };
    for (let i = 0; i < SERVICE_LIMIT; i++) {
      floods.push(app.request('POST', `/api/ofrep/v1/evaluate/flags/${flag.key}`, { headers: ofrepHeaders, body: { context: {} } }).then(checked(expectOfrepSingle)));
      floods.push(app.request('POST', '/api/ofrep/v1/evaluate/flags', { headers: ofrepHeaders, body: { context: {} } }).then(checked(expectOfrepBulk)));
      floods.push(app.request('POST', '/api/flags/evaluate/batch', { headers: attacker, body: { serviceId: fx.serviceId, flags: [{ flagKey: flag.key }] } }));
      floods.push(app.request('POST', '/api/connect/evaluate', { headers: attacker, body: { flagKey: flag.key, serviceId: fx.serviceId } }));
      floods.push(app.request('POST', '/api/connect/bulk-evaluate', { headers: attacker, body: { serviceId: fx.serviceId } }));
      floods.push(app.request('POST', '/api/connect/flags.v1.EvaluationService/ResolveBoolean', { headers: attacker, body: { flagKey: flag.key, serviceId: fx.serviceId } }));
    }
    const statuses = (await Promise.all(floods)).map((r) => r.status);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);

    // The real token holder still has its whole budget, and it is still enforced for it.
    const held: number[] = [];
    for (let i = 0; i <= SERVICE_LIMIT; i++) held.push((await evaluate(flag.key, fx.serviceId, fx.readToken)).status);
    expect(held).toEqual([...Array(SERVICE_LIMIT).fill(200), 429]);
  });

  it('holds anonymous callers by the per-IP limit instead', async () => {
    const flag = await createFlag(other.owner, other.serviceId, { type: 'boolean', enabled: true, defaultValue: true, isPublic: true });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: other.serviceId, environment: 'development' }, (r) => r.value === true, { token: other.readToken });
    const res = await evaluate(flag.key, other.serviceId, undefined, freshIp());
    expect(res.status).toBe(200);
    expect(res.headers.get('ratelimit-limit')).toBe(String(IP_LIMIT));
  });
});

describe('per-IP buckets for IPv6', () => {
  const from = (address: string) => ({ 'x-forwarded-for': address });

  it('counts the addresses of one /64 in one per-IP budget, on Express and the lean path', async () => {
    for (let i = 0; i < IP_LIMIT; i++) {
      const res = await app.request('GET', '/api/health', { headers: from(`2001:db8:1:2::${(i % 50).toString(16)}`) });
      if (res.status !== 200) throw new Error(`request ${i}: ${res.status}`);
    }
    expect((await app.request('GET', '/api/health', { headers: from('2001:db8:1:2:ffff::1') })).status).toBe(429);
    // The lean path counts locally and learns the shared count at its next sync (250 ms).
    await eventually(async () => (await evaluate('any', fx.serviceId, undefined, from('2001:db8:1:2:abcd::9'))).status === 429, 5_000);
    // The next /64 has its own budget.
    expect((await app.request('GET', '/api/health', { headers: from('2001:db8:1:3::1') })).status).toBe(200);
  });

  it('throttles demo writes per /64', async () => {
    const write = (address: string, n: number) =>
      app.request('PATCH', '/api/flags/bulk', { headers: from(address), body: { flags: [{ key: `px-${n}`, serviceId: DEMO, environment: 'development', updates: { enabled: true } }] } });
    const statuses = (await Promise.all([write('2001:db8:5:6::1', 1), write('2001:db8:5:6::2', 2), write('2001:db8:5:7::1', 3)])).map((r) => r.status);
    expect(statuses.sort()).toEqual([200, 200, 429]);
  });
});
