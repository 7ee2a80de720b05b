import postgres from 'postgres';
import { BackendUnavailableError, RequestDeadline, withDeadline } from '../../api/infra/deadline';
import { PRODUCTION_DEADLINE, requireInfra, startTestApp, eventually, type TestApp } from '../support/harness';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { createFixture, createFlag, uniqueKey, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';

// Backend outages (docs/operations.md#faults-and-recovery): a request that needs a missing
// backend settles with 503 + Retry-After instead of hanging, evaluation keeps answering from its
// snapshots, and the app serves again once the backend is back. The deadline is 4 s; the bound
// asserted here is generous for a noisy shared machine.
const SETTLE_BOUND_MS = 9_000;
// The load below is far over the default budgets; the rate limiter is not what is tested.
const UNLIMITED = { RATE_LIMIT_PER_IP: '1000000', RATE_LIMIT_PER_TOKEN: '1000000', RATE_LIMIT_PER_SERVICE: '1000000' };

interface Outcome {
  kind: 'write' | 'read' | 'evaluate' | 'signup';
  status: number;
  ms: number;
  retryAfter: string | null;
  key?: string;
  message?: string;
}

async function timed(kind: Outcome['kind'], run: () => Promise<{ status: number; headers: Headers; body?: unknown }>, key?: string): Promise<Outcome> {
  const started = Date.now();
  const res = await run();
  // The answer's message, when it was not a success: what a failure of this test shows.
  const message = res.status >= 300 ? (res.body as { message?: string } | undefined)?.message : undefined;
  return { kind, status: res.status, ms: Date.now() - started, retryAfter: res.headers.get('retry-after'), key, ...(message ? { message } : {}) };
}

function expectSettled(outcomes: Outcome[], allowed: Record<Outcome['kind'], number[]>) {
  const slow = outcomes.filter((o) => o.ms > SETTLE_BOUND_MS);
  expect(slow).toEqual([]);
  const unexpected = outcomes.filter((o) => !allowed[o.kind].includes(o.status));
  expect(unexpected).toEqual([]);
  const refusedWithoutRetryAfter = outcomes.filter((o) => o.status === 503 && !(Number(o.retryAfter) >= 1));
  expect(refusedWithoutRetryAfter).toEqual([]);
}

describe('Postgres connections terminated under load', () => {
  let app: TestApp;
  let fx: DataPlaneFixture;
  let flagKey: string;
  beforeAll(async () => {
    app = await startTestApp({ ...UNLIMITED, ...PRODUCTION_DEADLINE });
    fx = await createFixture(app);
    flagKey = (await createFlag(fx.owner, fx.serviceId, { type: 'boolean', enabled: true, defaultValue: true })).key;
    await untilEvaluated(app, { flagKey, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken, listener: 'data' });
  });
  afterAll(() => app?.stop());
  const listPath = () => `/api/flags?projectId=${fx.projectId}&serviceId=${fx.serviceId}&environment=development`;

  it('settles every request (success or 503 + Retry-After), keeps evaluating, loses no acknowledged write and recovers', async () => {
    const admin = postgres(requireInfra().databaseUrl, { max: 1, onnotice: () => undefined });
    const database = new URL(app.databaseUrl).pathname.slice(1);
    let killing = true;
    let terminated = 0;
    const killer = (async () => {
      while (killing) {
        const rows = await admin`SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE datname = ${database} AND application_name = ${`flags ${app.platform.instanceId}`} AND pid <> pg_backend_pid()`;
        terminated += rows.filter((r) => r.done).length;
        await new Promise((r) => setTimeout(r, 150));
      }
    })();

    const until = Date.now() + 6_000;
    const outcomes: Outcome[] = [];
    const worker = async (n: number) => {
      while (Date.now() < until) {
        const key = uniqueKey('fault');
        const step = outcomes.length % 3;
        if (n === 0) {
          outcomes.push(await timed('evaluate', () => app.request('POST', '/api/flags/evaluate', { body: { flagKey, serviceId: fx.serviceId }, token: fx.readToken, listener: 'data' })));
          await new Promise((r) => setTimeout(r, 20));
        } else if (step === 0) {
          outcomes.push(await timed('write', () => fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'development', type: 'boolean', enabled: true, defaultValue: false }), key));
        } else if (step === 1) {
          outcomes.push(await timed('write', () => fx.owner.request('PATCH', `/api/flags/${flagKey}?serviceId=${fx.serviceId}&environment=development`, { description: key })));
        } else {
          outcomes.push(await timed('read', () => fx.owner.request('GET', listPath())));
        }
      }
    };
    await Promise.all([0, 1, 2, 3, 4, 5].map(worker));
    killing = false;
    await killer;
    await admin.end();

    expect(terminated).toBeGreaterThan(0);
    expectSettled(outcomes, { write: [200, 201, 503], read: [200, 503], evaluate: [200], signup: [] });
    expect(outcomes.filter((o) => o.kind === 'evaluate').length).toBeGreaterThan(0);

    // Back to serving, with every acknowledged create stored.
    await eventually(async () => (await fx.owner.request('GET', listPath())).status === 200, 30_000);
    for (const created of outcomes.filter((o) => o.status === 201)) {
      const read = await fx.owner.request('GET', `/api/flags/${created.key}?serviceId=${fx.serviceId}&environment=development`);
      expect(read.status).toBe(200);
    }
  });
});

describe('a transaction under a request deadline', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
    await app.platform.db.sql`CREATE TABLE deadline_probe (id text PRIMARY KEY)`;
  });
  afterAll(() => app?.stop());

  it('rolls back instead of committing once the deadline has passed, and commits before it', async () => {
    const { sql } = app.platform.db;
    const late = withDeadline(new RequestDeadline(Date.now() + 200), () =>
      sql.begin(async (tx) => {
        await tx`INSERT INTO deadline_probe (id) VALUES ('late')`;
        await tx`SELECT pg_sleep(0.5)`;
      }),
    );
    await expect(late).rejects.toBeInstanceOf(BackendUnavailableError);
    await withDeadline(new RequestDeadline(Date.now() + 10_000), () => sql.begin((tx) => tx`INSERT INTO deadline_probe (id) VALUES ('in-time')`));
    expect((await sql`SELECT id FROM deadline_probe ORDER BY id`).map((r) => r.id)).toEqual(['in-time']);
  });
});

describe('Redis and Temporal that stop answering', () => {
  let app: TestApp;
  let fx: DataPlaneFixture;
  let flagKey: string;
  let redis: TcpProxy;
  let temporal: TcpProxy;
  beforeAll(async () => {
    const infra = requireInfra();
    const redisUrl = new URL(infra.redisUrl);
    redis = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
    const [temporalHost, temporalPort] = infra.temporalAddress.split(':');
    temporal = await startTcpProxy({ host: temporalHost, port: Number(temporalPort) });
    app = await startTestApp({ ...UNLIMITED, ...PRODUCTION_DEADLINE, REDIS_URL: `redis://${redis.address}`, TEMPORAL_ADDRESS: temporal.address });
    fx = await createFixture(app);
    flagKey = (await createFlag(fx.owner, fx.serviceId, { type: 'boolean', enabled: true, defaultValue: true })).key;
    await untilEvaluated(app, { flagKey, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken, listener: 'data' });
  });
  afterAll(async () => {
    redis?.restore();
    temporal?.restore();
    await app?.stop();
    await redis?.close();
    await temporal?.close();
  });

  const listPath = () => `/api/flags?projectId=${fx.projectId}&serviceId=${fx.serviceId}&environment=development`;
  const evaluate = () => timed('evaluate', () => app.request('POST', '/api/flags/evaluate', { body: { flagKey, serviceId: fx.serviceId }, token: fx.readToken, listener: 'data' }));

  it('answers 503 + Retry-After within the bound while Redis does not answer, keeps evaluating, and recovers', async () => {
    redis.blackhole();
    try {
      const outcomes = await Promise.all([
        timed('read', () => fx.owner.request('GET', listPath())),
        timed('write', () => fx.owner.request('POST', '/api/flags', { key: uniqueKey('redis'), serviceId: fx.serviceId, environment: 'development', type: 'boolean', enabled: true, defaultValue: false })),
        evaluate(),
        evaluate(),
      ]);
      expectSettled(outcomes, { write: [201, 503], read: [200, 503], evaluate: [200], signup: [] });
      expect(outcomes.filter((o) => o.kind !== 'evaluate').some((o) => o.status === 503)).toBe(true);
    } finally {
      redis.restore();
    }
    await eventually(async () => (await fx.owner.request('GET', listPath())).status === 200, 30_000);
  });

  it('answers 503 + Retry-After within the bound while Temporal does not answer, keeps evaluating, and recovers', async () => {
    // Signing up sends the verification mail through a workflow: stored, it waits for Temporal.
    const email = `${uniqueKey('t')}@example.com`;
    temporal.blackhole();
    try {
      const outcomes = await Promise.all([
        timed('signup', () => app.request('POST', '/api/auth/signup', { body: { email, password: 'correct horse battery', name: 'Temporal away' } })),
        evaluate(),
      ]);
      expectSettled(outcomes, { signup: [201], evaluate: [200], write: [], read: [] });
    } finally {
      temporal.restore();
    }
    const delivered = await eventually(async () => (await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(email)}`)).body.messages?.[0], 30_000);
    expect(delivered).toMatchObject({ to: email, token: expect.any(String) });
    // A canary's start waits up to 30 s for its first stage by design; a missing Temporal is a 503 within the bound all the same.
    const key = uniqueKey('canary');
    const rule = { id: 'beta', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: true };
    expect((await fx.owner.request('POST', '/api/flags', { key, serviceId: fx.serviceId, environment: 'production', type: 'boolean', defaultValue: false, targeting: [rule] })).status).toBe(201);
    const canary = { serviceId: fx.serviceId, ruleId: 'beta', initialRolloutPercent: 10, targetRolloutPercent: 50, rampStepPercent: 20, soakPeriodMinutes: 30, errorRateGateDelta: 0.01, latencyGateDeltaMs: 50, autoRollbackOnBreach: true };
    temporal.blackhole();
    try {
      const started = await timed('write', () => fx.owner.request('POST', `/api/flags/${key}/canary`, canary));
      expectSettled([started], { write: [503], evaluate: [], read: [], signup: [] });
    } finally {
      temporal.restore();
    }
    // Nothing was left running: once Temporal is back the canary starts.
    await eventually(async () => (await fx.owner.request('POST', `/api/flags/${key}/canary`, canary)).status === 201, 30_000);
  });
});
