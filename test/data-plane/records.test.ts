import { createHash } from 'node:crypto';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { expectOfrepSingle } from '../support/ofrep-schema';
import { createFixture, createFlag, personalToken, projectToken, untilEvaluated, type DataPlaneFixture } from './support';

let app: TestApp;
let fx: DataPlaneFixture;
let other: DataPlaneFixture;

beforeAll(async () => {
  app = await startTestApp({ ADMIN_EMAILS: 'ops@example.com' });
  fx = await createFixture(app);
  other = await createFixture(app);
});
afterAll(() => app?.stop());

const evaluate = (flagKey: string, context: Record<string, unknown>, token = fx.readToken, serviceId = fx.serviceId) =>
  app.request('POST', '/api/flags/evaluate', { listener: 'data', token, body: { flagKey, serviceId, context } });

describe('evaluation records', () => {
  it('records every evaluation in ClickHouse and reads them back newest first', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, {
      type: 'string',
      enabled: true,
      defaultValue: 'none',
      variants: [
        { name: 'a', value: 'A', weight: 50 },
        { name: 'b', value: 'B', weight: 50 },
      ],
    });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId, context: { targetingKey: 'warm' } }, (r) => r.reason === 'VARIANT', { token: fx.readToken });
    const since = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 5));
    for (const user of ['alice', 'bob', 'carol']) expect((await evaluate(flag.key, { targetingKey: user })).status).toBe(200);
    expect((await evaluate('ghost-flag', { targetingKey: 'alice' })).body.errorCode).toBe('FLAG_NOT_FOUND');
    // The batch route and OFREP record too.
    await app.request('POST', '/api/flags/evaluate/batch', { token: fx.readToken, body: { serviceId: fx.serviceId, flags: [{ key: flag.key }], context: { targetingKey: 'dave' } } });
    const ofrep = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${flag.key}`, {
      listener: 'data',
      token: fx.readToken,
      headers: { 'x-service-id': fx.serviceId },
      body: { context: { targetingKey: 'erin' } },
    });
    expectOfrepSingle(ofrep);

    const res = await fx.viewer.request('GET', `/api/evaluations?serviceId=${fx.serviceId}&flagKey=${flag.key}&since=${encodeURIComponent(since)}`);
    expect(res.status).toBe(200);
    expect(res.body.count).toBe(5);
    expect(res.body.limit).toBe(100);
    const sources = res.body.evaluations.map((e: { source: string }) => e.source);
    expect(sources.sort()).toEqual(['ofrep', 'rest', 'rest', 'rest', 'rest']);
    const alice = res.body.evaluations.find((e: { targetingKeyHash: string }) => e.targetingKeyHash === createHash('sha256').update('alice').digest('hex').slice(0, 32));
    expect(alice).toMatchObject({
      flagKey: flag.key,
      serviceId: fx.serviceId,
      environment: 'development',
      reason: 'VARIANT',
      variant: expect.stringMatching(/^[ab]$/),
      value: expect.stringMatching(/^[AB]$/),
      latencyMs: expect.any(Number),
      timestamp: expect.any(String),
    });
    expect(JSON.stringify(res.body)).not.toContain('alice');
    const times = res.body.evaluations.map((e: { timestamp: string }) => e.timestamp);
    expect([...times].sort().reverse()).toEqual(times);

    const errors = await fx.owner.request('GET', `/api/evaluations?serviceId=${fx.serviceId}&flagKey=ghost-flag`);
    expect(errors.body.evaluations[0]).toMatchObject({ reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND', value: null });
    const limited = await fx.owner.request('GET', `/api/evaluations?serviceId=${fx.serviceId}&limit=2`);
    expect(limited.body.evaluations).toHaveLength(2);
    // Without serviceId: every project the caller may read, and nothing of others.
    const mine = await fx.owner.request('GET', '/api/evaluations');
    expect(mine.body.evaluations.every((e: { serviceId: string }) => e.serviceId === fx.serviceId)).toBe(true);
    // Dashboard users only: a project token (it may ship in a browser bundle) is refused.
    expect((await app.request('GET', `/api/evaluations?flagKey=${flag.key}`, { token: fx.readToken })).status).toBe(403);
  });

  it('refuses outsiders, other projects, anonymous callers and bad queries', async () => {
    expect((await app.request('GET', '/api/evaluations')).status).toBe(401);
    expect((await fx.outsider.request('GET', `/api/evaluations?serviceId=${fx.serviceId}`)).status).toBe(404);
    expect((await app.request('GET', `/api/evaluations?serviceId=${fx.serviceId}`, { token: other.readToken })).status).toBe(403);
    expect((await app.request('GET', `/api/evaluations?serviceId=${fx.serviceId}`, { token: fx.writeOnlyToken })).status).toBe(403);
    expect((await fx.owner.request('GET', '/api/evaluations?limit=0')).status).toBe(400);
    expect((await fx.owner.request('GET', '/api/evaluations?since=yesterday')).status).toBe(400);
    const outsiderAll = await fx.outsider.request('GET', '/api/evaluations');
    expect(outsiderAll.status).toBe(200);
    expect(outsiderAll.body.evaluations).toEqual([]);
    // Not a data-plane route (docs/api-reference.md#addresses-and-processes).
    expect((await app.request('GET', '/api/evaluations', { listener: 'data', token: fx.readToken })).status).toBe(404);
  });

  it('DELETE clears a flag’s events for callers with delete permission only', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
    const keep = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    await untilEvaluated(app, { flagKey: keep.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
    const count = async (key: string) => (await fx.owner.request('GET', `/api/evaluations?serviceId=${fx.serviceId}&flagKey=${key}`)).body.count as number;
    expect(await count(flag.key)).toBeGreaterThan(0);

    const viewer = await fx.viewer.request('DELETE', `/api/evaluations?flagKey=${flag.key}&serviceId=${fx.serviceId}`);
    expect(viewer.status).toBe(403);
    expect(viewer.body.message).toBe("Forbidden: You need 'delete' permission");
    expect((await app.request('DELETE', `/api/evaluations?flagKey=${flag.key}`, { token: fx.readToken })).status).toBe(403);
    expect((await fx.outsider.request('DELETE', `/api/evaluations?flagKey=${flag.key}&serviceId=${fx.serviceId}`)).status).toBe(404);
    expect((await fx.owner.request('DELETE', '/api/evaluations')).status).toBe(400);
    // Cookie sessions need CSRF for DELETE.
    expect((await app.request('DELETE', `/api/evaluations?flagKey=${flag.key}`, { cookie: fx.owner.cookie })).status).toBe(403);
    expect(await count(flag.key)).toBeGreaterThan(0);

    const before = await count(flag.key);
    const cleared = await fx.owner.request('DELETE', `/api/evaluations?flagKey=${flag.key}&serviceId=${fx.serviceId}`);
    expect(cleared.status).toBe(200);
    expect(cleared.body).toEqual({ flagKey: flag.key, deleted: before });
    expect(await count(flag.key)).toBe(0);
    expect(await count(keep.key)).toBeGreaterThan(0);
    const deleteToken = await projectToken(fx.owner, fx.projectId, { delete: true });
    expect((await app.request('DELETE', `/api/evaluations?flagKey=${keep.key}`, { token: deleteToken })).status).toBe(403);
    const byToken = await app.request('DELETE', `/api/evaluations?flagKey=${keep.key}`, { token: await personalToken(app, fx.owner, 'write') });
    expect(byToken.status).toBe(200);
    expect(await count(keep.key)).toBe(0);
  });

  it('counts evaluation events in /api/health/evaluation', async () => {
    const ops = await app.signup({ email: 'ops@example.com', verified: true });
    const res = await ops.request('GET', '/api/health/evaluation', undefined, { listener: 'data' });
    expect(res.status).toBe(200);
    expect(res.body.checks).toMatchObject({
      engine: { working: true },
      snapshots: { working: true, ready: true, services: expect.any(Number), flags: expect.any(Number) },
      evaluationEvents: { working: true, written: expect.any(Number), dropped: 0 },
      streams: { working: true, open: expect.any(Number) },
    });
    expect(res.body.checks.evaluationEvents.written).toBeGreaterThan(0);
  });
});

describe('GET /api/contexts', () => {
  it('groups recent contexts by targetingKey with attributes, counts and values', async () => {
    const a = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'x' });
    const b = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    await untilEvaluated(app, { flagKey: b.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
    await evaluate(a.key, { targetingKey: 'ctx-user', plan: 'gold', country: 'NL' });
    await evaluate(b.key, { targetingKey: 'ctx-user', plan: 'platinum' });
    await evaluate(a.key, { targetingKey: 'ctx-other' });
    const list = await fx.viewer.request('GET', `/api/contexts?serviceId=${fx.serviceId}&environment=development`);
    expect(list.status).toBe(200);
    const user = list.body.contexts.find((c: { targetingKey: string }) => c.targetingKey === 'ctx-user');
    expect(user).toMatchObject({
      targetingKey: 'ctx-user',
      attributes: { plan: 'platinum' },
      evaluationCount: 2,
      flags: { [a.key]: 'x', [b.key]: true },
      environments: ['development'],
      lastSeen: expect.any(String),
    });
    expect(list.body.contexts.map((c: { targetingKey: string }) => c.targetingKey)).toContain('ctx-other');

    const one = await fx.viewer.request('GET', `/api/contexts?serviceId=${fx.serviceId}&key=ctx-user`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ serviceId: fx.serviceId, targetingKey: 'ctx-user', flags: { [a.key]: 'x', [b.key]: true } });
    expect((await fx.viewer.request('GET', `/api/contexts?serviceId=${fx.serviceId}&key=nobody`)).status).toBe(404);
  });

  it('refuses anonymous callers, outsiders and other projects; needs serviceId', async () => {
    expect((await app.request('GET', `/api/contexts?serviceId=${fx.serviceId}`)).status).toBe(401);
    expect((await fx.outsider.request('GET', `/api/contexts?serviceId=${fx.serviceId}`)).status).toBe(404);
    expect((await app.request('GET', `/api/contexts?serviceId=${fx.serviceId}`, { token: fx.readToken })).status).toBe(403);
    expect((await fx.owner.request('GET', '/api/contexts')).status).toBe(400);
  });
});

describe('GET /api/sdk-config', () => {
  it('tells an SDK where to evaluate and stream, how often to poll, and the snapshot ETag', async () => {
    for (const listener of ['control', 'data'] as const) {
      const res = await app.request('GET', `/api/sdk-config?serviceId=${fx.serviceId}&environment=development`, { listener, token: fx.readToken });
      expect(res.status).toBe(200);
      const base = app.urls[listener];
      expect(res.body).toMatchObject({
        serviceId: fx.serviceId,
        environment: 'development',
        dataUrl: base,
        streamUrl: `${base}/api/flags/stream?serviceId=${fx.serviceId}&environment=development`,
        pollingIntervalMs: expect.any(Number),
        flagsEtag: expect.stringMatching(/^W\/"/),
        flagCount: expect.any(Number),
        demo: false,
        endpoints: expect.objectContaining({ evaluate: `${base}/api/flags/evaluate`, ofrep: `${base}/api/ofrep/v1` }),
        limits: expect.objectContaining({ batch: 100 }),
      });
      expect(res.headers.get('etag')).toBe(res.body.flagsEtag);
      const again = await app.request('GET', `/api/sdk-config?serviceId=${fx.serviceId}&environment=development`, {
        listener,
        token: fx.readToken,
        headers: { 'if-none-match': res.body.flagsEtag },
      });
      expect(again.status).toBe(304);
    }
    // The ETag moves with any flag change.
    const first = (await app.request('GET', `/api/sdk-config?serviceId=${fx.serviceId}`, { token: fx.readToken })).body.flagsEtag;
    await createFlag(fx.owner, fx.serviceId, { enabled: true });
    await eventually(async () => (await app.request('GET', `/api/sdk-config?serviceId=${fx.serviceId}`, { token: fx.readToken })).body.flagsEtag !== first);
  });

  it('refuses personal tokens and hides other services', async () => {
    const pat = await personalToken(app, fx.owner);
    for (const listener of ['control', 'data'] as const) {
      const res = await app.request('GET', `/api/sdk-config?serviceId=${fx.serviceId}`, { listener, token: pat });
      expect(res.status).toBe(403);
      expect(res.body.error).toBe('FORBIDDEN');
    }
    expect((await app.request('GET', '/api/sdk-config?serviceId=svc_missing')).status).toBe(401);
    expect((await app.request('GET', '/api/sdk-config?serviceId=svc_missing', { token: fx.readToken })).status).toBe(404);
    expect((await app.request('GET', '/api/sdk-config')).status).toBe(400);
  });
});
