import { startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, personalToken, projectToken, untilEvaluated, type DataPlaneFixture } from './support';

let app: TestApp;
let fx: DataPlaneFixture;
let other: DataPlaneFixture;

beforeAll(async () => {
  app = await startTestApp();
  fx = await createFixture(app);
  other = await createFixture(app);
});
afterAll(() => app?.stop());

const LISTENERS = ['control', 'data'] as const;

describe('POST /api/flags/evaluate', () => {
  it('evaluates a targeting rule, variants and the default with a read token on both listeners', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, {
      type: 'string',
      enabled: true,
      defaultValue: 'blue',
      targeting: [{ id: 'vip', conditions: [{ property: 'plan', operator: 'equals', value: 'gold' }], value: 'gold-theme' }],
    });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId, environment: 'development', context: {} }, (r) => r.reason === 'DEFAULT', {
      token: fx.readToken,
    });
    for (const listener of LISTENERS) {
      const match = await app.request('POST', '/api/flags/evaluate', {
        listener,
        token: fx.readToken,
        body: { flagKey: flag.key, serviceId: fx.serviceId, environment: 'development', context: { targetingKey: 'u1', plan: 'gold' } },
      });
      expect(match.status).toBe(200);
      expect(match.body).toEqual({ flagKey: flag.key, value: 'gold-theme', reason: 'TARGETING_MATCH' });
      expect(match.headers.get('ratelimit-limit')).toBeTruthy();
      expect(match.headers.get('ratelimit-remaining')).toBeTruthy();
      expect(Number(match.headers.get('ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000 - 1);
      expect(match.headers.get('x-request-id')).toBeTruthy();
      const fallback = await app.request('POST', '/api/flags/evaluate', {
        listener,
        token: fx.readToken,
        body: { flagKey: flag.key, serviceId: fx.serviceId, environment: 'development', context: { plan: 'silver' } },
      });
      expect(fallback.body).toEqual({ flagKey: flag.key, value: 'blue', reason: 'DEFAULT' });
    }
  });

  it('answers the request default with ERROR / FLAG_NOT_FOUND for a missing flag, and DEFAULT for a disabled one', async () => {
    const missing = await app.request('POST', '/api/flags/evaluate', {
      token: fx.readToken,
      body: { flagKey: 'does-not-exist', serviceId: fx.serviceId, defaultValue: 42, context: {} },
    });
    expect(missing.status).toBe(200);
    expect(missing.body).toMatchObject({ flagKey: 'does-not-exist', value: 42, reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND' });

    const disabled = await createFlag(fx.owner, fx.serviceId, { type: 'number', enabled: false, defaultValue: 7 });
    const body = await untilEvaluated(app, { flagKey: disabled.key, serviceId: fx.serviceId, defaultValue: 1 }, (r) => r.reason !== 'ERROR', { token: fx.readToken });
    expect(body).toEqual({ flagKey: disabled.key, value: 7, reason: 'DEFAULT' });
  });

  it('picks weighted variants by bucket and reports the variant', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, {
      type: 'string',
      enabled: true,
      defaultValue: 'none',
      variants: [
        { name: 'a', value: 'A', weight: 50 },
        { name: 'b', value: 'B', weight: 50 },
      ],
    });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId, context: { targetingKey: 'k' } }, (r) => r.reason === 'VARIANT', { token: fx.readToken });
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const res = await app.request('POST', '/api/flags/evaluate', {
        listener: 'data',
        token: fx.readToken,
        body: { flagKey: flag.key, serviceId: fx.serviceId, context: { targetingKey: `user-${i}` } },
      });
      expect(res.body.reason).toBe('VARIANT');
      expect(res.body.value).toBe(res.body.variant.toUpperCase());
      seen.add(res.body.variant);
      // Deterministic: the same key gets the same variant again.
      const again = await app.request('POST', '/api/flags/evaluate', {
        token: fx.readToken,
        body: { flagKey: flag.key, serviceId: fx.serviceId, context: { targetingKey: `user-${i}` } },
      });
      expect(again.body.variant).toBe(res.body.variant);
    }
    expect([...seen].sort()).toEqual(['a', 'b']);
  });

  it('adds _debug timings only with ?debug=true', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: true });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.reason === 'DEFAULT', { token: fx.readToken });
    const res = await app.request('POST', '/api/flags/evaluate?debug=true', { token: fx.readToken, body: { flagKey: flag.key, serviceId: fx.serviceId } });
    expect(res.status).toBe(200);
    expect(res.body._debug).toEqual({
      timings: { rateLimit: expect.any(Number), validation: expect.any(Number), cacheGet: expect.any(Number), evaluate: expect.any(Number) },
      cacheHit: true,
      totalMs: expect.any(Number),
    });
    const plain = await app.request('POST', '/api/flags/evaluate?debug=false', { token: fx.readToken, body: { flagKey: flag.key, serviceId: fx.serviceId } });
    expect(plain.body._debug).toBeUndefined();
  });

  it('lets anyone evaluate a public flag, but not a private or missing one', async () => {
    const pub = await createFlag(fx.owner, fx.serviceId, { enabled: true, isPublic: true, defaultValue: true });
    const priv = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    const body = (flagKey: string) => ({ flagKey, serviceId: fx.serviceId });
    const ok = await untilEvaluated(app, body(pub.key), (r) => r.reason === 'DEFAULT');
    expect(ok.value).toBe(true);
    for (const listener of LISTENERS) {
      expect((await app.request('POST', '/api/flags/evaluate', { listener, body: body(pub.key) })).status).toBe(200);
      const denied = await app.request('POST', '/api/flags/evaluate', { listener, body: body(priv.key) });
      expect(denied.status).toBe(401);
      expect(denied.body).toEqual({ error: 'Unauthorized', message: expect.any(String) });
      expect((await app.request('POST', '/api/flags/evaluate', { listener, body: body('no-such-flag') })).status).toBe(401);
      expect((await app.request('POST', '/api/flags/evaluate', { listener, body: { flagKey: 'x', serviceId: 'svc_unknown' } })).status).toBe(401);
    }
  });

  it('accepts sessions of project members (any role) and refuses outsiders and other projects (BOLA)', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
    const viewer = await fx.viewer.request('POST', '/api/flags/evaluate', { flagKey: flag.key, serviceId: fx.serviceId });
    expect(viewer.status).toBe(200);
    expect(viewer.body.value).toBe(true);
    // Read-only: no CSRF header needed for a session.
    const noCsrf = await app.request('POST', '/api/flags/evaluate', { cookie: fx.viewer.cookie, body: { flagKey: flag.key, serviceId: fx.serviceId } });
    expect(noCsrf.status).toBe(200);

    const outsider = await fx.outsider.request('POST', '/api/flags/evaluate', { flagKey: flag.key, serviceId: fx.serviceId });
    expect(outsider.status).toBe(404);
    const foreignToken = await app.request('POST', '/api/flags/evaluate', { token: other.readToken, body: { flagKey: flag.key, serviceId: fx.serviceId } });
    expect(foreignToken.status).toBe(404);
    expect(foreignToken.body.error).toBe('Not Found');
    const writeOnly = await app.request('POST', '/api/flags/evaluate', { token: fx.writeOnlyToken, body: { flagKey: flag.key, serviceId: fx.serviceId } });
    expect(writeOnly.status).toBe(403);
    expect(writeOnly.body.message).toBe("Forbidden: You need 'read' permission");
    const unknownService = await app.request('POST', '/api/flags/evaluate', { token: fx.readToken, body: { flagKey: flag.key, serviceId: 'svc_nope' } });
    expect(unknownService.status).toBe(404);
    // An id Postgres cannot even hold (NUL) is just an unknown service, never a 500.
    const nul = await app.request('POST', '/api/flags/evaluate/batch', { token: fx.readToken, body: { serviceId: 'svc\u0000x', flags: [{ key: 'a' }] } });
    expect(nul.status).toBe(404);
    expect((await fx.viewer.request('GET', '/api/contexts?serviceId=svc%00x')).status).toBe(404);
    const badToken = await app.request('POST', '/api/flags/evaluate', { token: 'fgr_not_a_real_token', body: { flagKey: flag.key, serviceId: fx.serviceId } });
    expect(badToken.status).toBe(401);
  });

  it('accepts opaque and JWT project tokens with read, and refuses them at once after revocation', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
    const jwt = await fx.owner.request('POST', `/api/projects/${fx.projectId}/tokens`, { name: 'sdk-jwt', scopes: ['read'] });
    const opaque = await fx.owner.request('POST', `/api/projects/${fx.projectId}/tokens`, { name: 'sdk-opaque', permissions: { read: true } });
    expect([jwt.status, opaque.status]).toEqual([201, 201]);
    const secrets = [jwt.body.accessToken as string, opaque.body.value as string];
    const body = { flagKey: flag.key, serviceId: fx.serviceId };
    for (const listener of LISTENERS) {
      for (const token of secrets) {
        const res = await app.request('POST', '/api/flags/evaluate', { listener, token, body });
        expect(res.status).toBe(200);
        expect(res.body.value).toBe(true);
      }
    }
    const list = await fx.owner.request('GET', `/api/projects/${fx.projectId}/tokens`);
    for (const t of list.body.tokens as { id: string; name: string }[]) {
      if (t.name === 'sdk-jwt' || t.name === 'sdk-opaque') expect((await fx.owner.request('DELETE', `/api/projects/${fx.projectId}/tokens/${t.id}`)).status).toBe(204);
    }
    for (const listener of LISTENERS) {
      for (const token of secrets) expect((await app.request('POST', '/api/flags/evaluate', { listener, token, body })).status).toBe(401);
    }
  });

  it('refuses personal access tokens on both listeners with 403 FORBIDDEN', async () => {
    const pat = await personalToken(app, fx.owner, 'admin');
    for (const listener of LISTENERS) {
      const res = await app.request('POST', '/api/flags/evaluate', { listener, token: pat, body: { flagKey: 'anything', serviceId: fx.serviceId } });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: 'FORBIDDEN', message: expect.stringMatching(/^Forbidden: personal tokens cannot evaluate flags/) });
    }
  });

  it('validates the body: 400 with details, 415 for non-JSON, 413 over 64 KB, malformed JSON', async () => {
    const cases: [unknown, string][] = [
      [{ serviceId: fx.serviceId }, 'body.flagKey'],
      [{ flagKey: 'x', serviceId: fx.serviceId, environment: 'qa' }, 'body.environment'],
      [{ flagKey: 'x', serviceId: fx.serviceId, extra: true }, 'body'],
    ];
    for (const [body, path] of cases) {
      const res = await app.request('POST', '/api/flags/evaluate', { token: fx.readToken, body });
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('Bad Request');
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    // A context that is not an object is an evaluation error, as in the engine
    // (docs/evaluation.md#context).
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
    const arrayContext = await app.request('POST', '/api/flags/evaluate', { token: fx.readToken, body: { flagKey: flag.key, serviceId: fx.serviceId, defaultValue: 'd', context: [] } });
    expect(arrayContext.status).toBe(200);
    expect(arrayContext.body).toMatchObject({ value: 'd', reason: 'ERROR', errorCode: 'INVALID_CONTEXT' });
    const empty = await app.request('POST', '/api/flags/evaluate', { token: fx.readToken });
    expect(empty.status).toBe(400);
    const text = await app.request('POST', '/api/flags/evaluate', { token: fx.readToken, rawBody: 'flagKey=x', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(415);
    const malformed = await app.request('POST', '/api/flags/evaluate', { token: fx.readToken, rawBody: '{"flagKey":', headers: { 'content-type': 'application/json' } });
    expect(malformed.status).toBe(400);
    expect(malformed.body.message).toBe('Malformed JSON body');
    const huge = await app.request('POST', '/api/flags/evaluate', {
      token: fx.readToken,
      body: { flagKey: 'x', serviceId: fx.serviceId, context: { blob: 'x'.repeat(70 * 1024) } },
    });
    expect(huge.status).toBe(413);
    expect(huge.body.error).toBe('Payload Too Large');
  });

  it('serves only GET of other routes through Express (wrong method is a 404 in the envelope)', async () => {
    const res = await app.request('GET', '/api/flags/evaluate', { token: fx.readToken, listener: 'data' });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'Not Found', message: expect.any(String) });
  });

  it('sees a change made on the control plane on the data plane', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: false, defaultValue: false });
    const body = { flagKey: flag.key, serviceId: fx.serviceId, context: {} };
    await untilEvaluated(app, body, (r) => r.reason === 'DEFAULT', { token: fx.readToken, listener: 'data' });
    const toggled = await fx.owner.request('POST', `/api/flags/${flag.key}/toggle?serviceId=${fx.serviceId}&environment=development`, { enabled: true });
    expect(toggled.status).toBe(200);
    await untilEvaluated(app, { ...body, defaultValue: 'x' }, (r) => r.reason === 'DEFAULT' && r.value === false, { token: fx.readToken, listener: 'data' });
    const patched = await fx.owner.request('PATCH', `/api/flags/${flag.key}?serviceId=${fx.serviceId}&environment=development`, { defaultValue: true });
    expect(patched.status).toBe(200);
    await untilEvaluated(app, body, (r) => r.value === true, { token: fx.readToken, listener: 'data' });
    const deleted = await fx.owner.request('DELETE', `/api/flags/${flag.key}?serviceId=${fx.serviceId}&environment=development`);
    expect([200, 204]).toContain(deleted.status);
    await untilEvaluated(app, body, (r) => r.errorCode === 'FLAG_NOT_FOUND', { token: fx.readToken, listener: 'data' });
  });
});

describe('CORS on SDK routes', () => {
  it('answers preflights and lets other origins read answers (errors included), without credentials', async () => {
    const preflight = await app.request('OPTIONS', '/api/flags/evaluate', {
      listener: 'data',
      headers: { origin: 'https://shop.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(preflight.headers.get('access-control-allow-credentials')).toBeNull();
    const denied = await app.request('POST', '/api/flags/evaluate/batch', { listener: 'data', headers: { origin: 'https://shop.example' }, body: { serviceId: 'svc_x', flags: [{ key: 'a' }] } });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('access-control-allow-origin')).toBe('*');
    expect(denied.headers.get('access-control-expose-headers')).toMatch(/RateLimit-Remaining/);
    // Dashboard routes get no CORS.
    const dashboard = await app.request('GET', '/api/evaluations', { headers: { origin: 'https://shop.example' } });
    expect(dashboard.headers.get('access-control-allow-origin')).toBeNull();
    const dashboardPreflight = await app.request('OPTIONS', '/api/evaluations', { headers: { origin: 'https://shop.example' } });
    expect(dashboardPreflight.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('POST /api/flags/evaluate/batch', () => {
  it('evaluates up to 100 flags, accepting `key` for `flagKey`', async () => {
    const a = await createFlag(fx.owner, fx.serviceId, { enabled: true, defaultValue: true });
    const b = await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'b' });
    await untilEvaluated(app, { flagKey: b.key, serviceId: fx.serviceId }, (r) => r.value === 'b', { token: fx.readToken });
    for (const listener of LISTENERS) {
      const res = await app.request('POST', '/api/flags/evaluate/batch', {
        listener,
        token: fx.readToken,
        body: { serviceId: fx.serviceId, environment: 'development', flags: [{ flagKey: a.key }, { key: b.key }, { key: 'missing', defaultValue: 0 }], context: { targetingKey: 'u' } },
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        results: [
          { flagKey: a.key, value: true, reason: 'DEFAULT' },
          { flagKey: b.key, value: 'b', reason: 'DEFAULT' },
          { flagKey: 'missing', value: 0, reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND', errorMessage: expect.any(String) },
        ],
      });
    }
    const debug = await app.request('POST', '/api/flags/evaluate/batch?debug=true', { token: fx.readToken, body: { serviceId: fx.serviceId, flags: [{ key: a.key }] } });
    expect(debug.body._debug).toMatchObject({ cacheHit: true, totalMs: expect.any(Number) });
  });

  it('refuses more than 100 flags on a normal service, items without a key, PATs and private flags for anonymous callers', async () => {
    const flags = Array.from({ length: 101 }, (_, i) => ({ key: `k-${i}` }));
    const tooMany = await app.request('POST', '/api/flags/evaluate/batch', { token: fx.readToken, body: { serviceId: fx.serviceId, flags } });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.details).toEqual([{ path: 'body.flags', message: expect.stringContaining('100') }]);
    const noKey = await app.request('POST', '/api/flags/evaluate/batch', { token: fx.readToken, body: { serviceId: fx.serviceId, flags: [{ defaultValue: 1 }] } });
    expect(noKey.status).toBe(400);
    const pat = await personalToken(app, fx.viewer, 'read');
    const refused = await app.request('POST', '/api/flags/evaluate/batch', { listener: 'data', token: pat, body: { serviceId: fx.serviceId, flags: [{ key: 'x' }] } });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe('FORBIDDEN');
    const priv = await createFlag(fx.owner, fx.serviceId, { enabled: true });
    const pub = await createFlag(fx.owner, fx.serviceId, { enabled: true, isPublic: true });
    await untilEvaluated(app, { flagKey: pub.key, serviceId: fx.serviceId }, (r) => r.reason === 'DEFAULT');
    const anonymous = await app.request('POST', '/api/flags/evaluate/batch', { body: { serviceId: fx.serviceId, flags: [{ key: pub.key }, { key: priv.key }] } });
    expect(anonymous.status).toBe(401);
    const onlyPublic = await app.request('POST', '/api/flags/evaluate/batch', { body: { serviceId: fx.serviceId, flags: [{ key: pub.key }] } });
    expect(onlyPublic.status).toBe(200);
    const foreign = await app.request('POST', '/api/flags/evaluate/batch', { token: other.readToken, body: { serviceId: fx.serviceId, flags: [{ key: priv.key }] } });
    expect(foreign.status).toBe(404);
  });
});

describe('rate limits', () => {
  let limited: TestApp;
  let lfx: DataPlaneFixture;
  beforeAll(async () => {
    limited = await startTestApp({ RATE_LIMIT_PER_SERVICE: '5', EVAL_RATE_LIMIT_SYNC_MS: '50' });
    lfx = await createFixture(limited);
  });
  afterAll(() => limited?.stop());

  it('answers 429 with Retry-After past the per-service budget, with RateLimit headers on every answer', async () => {
    const token = await projectToken(lfx.owner, lfx.projectId, { read: true });
    const flag = await createFlag(lfx.owner, lfx.serviceId, { enabled: true });
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 8; i++) {
      last = await limited.request('POST', '/api/flags/evaluate', { listener: 'data', token, body: { flagKey: flag.key, serviceId: lfx.serviceId } });
      statuses.push(last.status);
      expect(last.headers.get('ratelimit-limit')).toBeTruthy();
    }
    expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(statuses.slice(5)).toEqual([429, 429, 429]);
    expect(last!.body).toEqual({ error: 'Too Many Requests', message: expect.stringContaining('per service') });
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(last!.headers.get('ratelimit-remaining')).toBe('0');
    // The budget is shared: the batch route (Express) sees the same exhausted service counter.
    const batch = await limited.request('POST', '/api/flags/evaluate/batch', { token, body: { serviceId: lfx.serviceId, flags: [{ key: flag.key }] } });
    expect(batch.status).toBe(429);
  });
});
