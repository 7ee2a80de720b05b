import { PasswordHasher } from '../../api/features/accounts/passwords';
import { HttpError } from '../../api/http/errors';
import { eventually, startTestApp, type TestApp, type TestResponse } from '../support/harness';

/**
 * Sign-in throttles: a per-account lockout with exponential backoff, a
 * per-IP budget on every /api/auth/* route, both answering 429 with Retry-After in the header
 * and the envelope, and a bound on concurrent scrypt work. TRUST_PROXY lets each test speak
 * from its own address through X-Forwarded-For.
 */

let ipCounter = 0;
const freshIp = () => `198.51.100.${++ipCounter}`;

const login = (app: TestApp, email: string, password: string, ip: string) =>
  app.request('POST', '/api/auth/login', { body: { email, password }, headers: { 'x-forwarded-for': ip } });

function retryAfter(res: TestResponse): number {
  expect(res.status).toBe(429);
  const header = Number(res.headers.get('retry-after'));
  expect(res.body).toEqual({ error: 'Too Many Requests', message: expect.any(String), retryAfter: header });
  return header;
}

describe('per-account lockout', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ TRUST_PROXY: '1', AUTH_LOCKOUT_THRESHOLD: '3', AUTH_LOCKOUT_BASE_SECONDS: '2', AUTH_RATE_LIMIT_PER_IP: '1000' });
  });
  afterAll(() => app?.stop());

  it('locks after repeated failures with a growing Retry-After, refuses the right password meanwhile, and a success resets it', async () => {
    const user = await app.signup();
    const ip = freshIp();
    for (let i = 0; i < 3; i++) expect((await login(app, user.email, 'wrong password!', ip)).status).toBe(401);

    // Locked: even the right password is refused, from any address.
    const first = retryAfter(await login(app, user.email, user.password, freshIp()));
    expect(first).toBeGreaterThanOrEqual(1);
    expect(first).toBeLessThanOrEqual(2);

    // Once the lock runs out one more failure locks again, twice as long.
    await eventually(async () => (await login(app, user.email, 'wrong password!', ip)).status === 401, 20_000, 250);
    const second = retryAfter(await login(app, user.email, user.password, ip));
    expect(second).toBeGreaterThan(first);
    expect(second).toBeGreaterThan(2);
    expect(second).toBeLessThanOrEqual(4);

    // A successful sign-in after the lock clears the count: the next failure is a plain 401.
    const ok = await eventually(async () => {
      const res = await login(app, user.email, user.password, ip);
      return res.status === 200 && res;
    }, 20_000, 250);
    expect(ok.body.user.id).toBe(user.id);
    expect((await login(app, user.email, 'wrong password!', ip)).status).toBe(401);
    expect((await login(app, user.email, user.password, ip)).status).toBe(200);
  });

  it('treats an unknown e-mail exactly like an existing one (no account enumeration)', async () => {
    const user = await app.signup();
    const unknown = `nobody-${Date.now()}@example.com`;
    const bodies: Record<string, unknown[]> = { known: [], unknown: [] };
    for (const [which, email] of [['known', user.email], ['unknown', unknown]] as const) {
      for (let i = 0; i < 4; i++) {
        const res = await login(app, email, 'wrong password!', freshIp());
        bodies[which].push({ status: res.status, body: { ...res.body, retryAfter: res.body.retryAfter && 'n' } });
      }
    }
    expect(bodies.known).toEqual(bodies.unknown);
    expect(bodies.known.map((b: any) => b.status)).toEqual([401, 401, 401, 429]);
  });
});

describe('per-IP budget on /api/auth/*', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ TRUST_PROXY: '1', AUTH_RATE_LIMIT_PER_IP: '5', AUTH_RATE_LIMIT_WINDOW_SECONDS: '60' });
  });
  afterAll(() => app?.stop());

  it('throttles one address across different accounts and every auth route, not other addresses', async () => {
    const ip = freshIp();
    for (let i = 0; i < 5; i++) {
      expect((await login(app, `victim-${i}-${Date.now()}@example.com`, 'guess number one', ip)).status).toBe(401);
    }
    const wait = retryAfter(await login(app, `victim-x-${Date.now()}@example.com`, 'guess number one', ip));
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(60);
    const signup = await app.request('POST', '/api/auth/signup', {
      body: { email: `new-${Date.now()}@example.com`, password: 'long enough pw', name: 'N' },
      headers: { 'x-forwarded-for': ip },
    });
    retryAfter(signup);
    expect((await login(app, `victim-y-${Date.now()}@example.com`, 'guess number one', freshIp())).status).toBe(401);
  });
});

describe('bounded scrypt work', () => {
  it('runs at most `concurrency` hashes at once, queues the rest and refuses past the queue bound', async () => {
    const hasher = new PasswordHasher({ costLog2: 12, concurrency: 2, maxQueue: 6 });
    let peakRunning = 0;
    let peakQueued = 0;
    let sampling = true;
    const sample = () => {
      const { running, queued } = hasher.load();
      peakRunning = Math.max(peakRunning, running);
      peakQueued = Math.max(peakQueued, queued);
      if (sampling) setImmediate(sample);
    };
    sample();
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => hasher.hash(`password ${i}`)));
    sampling = false;
    expect(peakRunning).toBe(2);
    expect(peakQueued).toBe(6);
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    expect(refused).toHaveLength(2);
    for (const error of refused) {
      expect(error).toBeInstanceOf(HttpError);
      expect(error).toMatchObject({ status: 503, extra: { retryAfter: 1 } });
    }
    const hashes = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(hashes).toHaveLength(8);
    await expect(hasher.verify('password 0', hashes[0])).resolves.toBe(true);
    await expect(hasher.verify('password 1', hashes[0])).resolves.toBe(false);
    expect(hasher.load()).toEqual({ running: 0, queued: 0 });
  });

  it('completes many concurrent sign-ins over HTTP with a bound of one', async () => {
    const app = await startTestApp({ TRUST_PROXY: '1', SCRYPT_CONCURRENCY: '1', SCRYPT_MAX_QUEUE: '100', AUTH_RATE_LIMIT_PER_IP: '1000' });
    try {
      const users = await Promise.all(Array.from({ length: 12 }, () => app.signup()));
      const results = await Promise.all(users.map((u) => login(app, u.email, u.password, freshIp())));
      expect(results.map((r) => r.status)).toEqual(users.map(() => 200));
      expect(results.map((r) => r.body.user.id)).toEqual(users.map((u) => u.id));
    } finally {
      await app.stop();
    }
  });
});
