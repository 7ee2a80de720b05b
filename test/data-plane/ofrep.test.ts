import { OFREPProvider } from '@openfeature/ofrep-provider';
import { ErrorCode, OpenFeature } from '@openfeature/server-sdk';
import { startTestApp, type TestApp } from '../support/harness';
import { expectOfrepBulk, expectOfrepSingle } from '../support/ofrep-schema';
import { createFixture, createFlag, personalToken, untilEvaluated, type DataPlaneFixture } from './support';

let app: TestApp;
let fx: DataPlaneFixture;
let other: DataPlaneFixture;
const keys: Record<string, string> = {};

beforeAll(async () => {
  app = await startTestApp();
  fx = await createFixture(app);
  other = await createFixture(app);
  const make = async (name: string, body: Record<string, unknown>) => {
    keys[name] = (await createFlag(fx.owner, fx.serviceId, body)).key;
  };
  await make('bool', { type: 'boolean', enabled: true, defaultValue: false, targeting: [{ conditions: [{ property: 'beta', operator: 'equals', value: true }], value: true }] });
  await make('str', { type: 'string', enabled: true, defaultValue: 'red', variants: [{ name: 'only', value: 'green', weight: 100 }] });
  await make('num', { type: 'number', enabled: true, defaultValue: 3 });
  await make('float', { type: 'number', enabled: true, defaultValue: 2.5 });
  await make('obj', { type: 'object', enabled: true, defaultValue: { layout: 'grid', columns: 3 } });
  await make('off', { type: 'boolean', enabled: false, defaultValue: true });
  await make('pub', { type: 'string', enabled: true, isPublic: true, defaultValue: 'open' });
  await make('prod', { type: 'boolean', enabled: true, defaultValue: true, environment: 'production' });
  // Snapshots follow the bus: wait until the last one is served.
  await untilEvaluated(app, { flagKey: keys.pub, serviceId: fx.serviceId }, (r) => r.value === 'open');
  await untilEvaluated(app, { flagKey: keys.prod, serviceId: fx.serviceId, environment: 'production' }, (r) => r.value === true, { token: fx.readToken });
});
afterAll(async () => {
  await OpenFeature.close();
  await app?.stop();
});

const ofrepBase = (listener: 'control' | 'data') => `${app.urls[listener]}/api`;

/** What the provider fetches, each answer checked against the published OFREP schema on the way. */
async function checkedFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const res = await fetch(input, init);
  const text = await res.clone().text();
  const answer = { status: res.status, body: text ? JSON.parse(text) : undefined };
  const url = String(input instanceof Request ? input.url : input);
  if (/\/evaluate\/flags\/[^/?]+/.test(url)) expectOfrepSingle(answer);
  else expectOfrepBulk(answer);
  return res;
}

async function client(name: string, listener: 'control' | 'data', headers: Record<string, string>) {
  await OpenFeature.setProviderAndWait(name, new OFREPProvider({ baseUrl: ofrepBase(listener), headers, fetchImplementation: checkedFetch }));
  return OpenFeature.getClient(name);
}

describe('the OpenFeature server SDK with the OFREP provider', () => {
  for (const listener of ['control', 'data'] as const) {
    it(`resolves every type, reasons and errors on the ${listener} listener`, async () => {
      const of = await client(`ofrep-${listener}`, listener, { Authorization: `Bearer ${fx.readToken}`, 'X-Service-Id': fx.serviceId });

      const matched = await of.getBooleanDetails(keys.bool, false, { targetingKey: 'u1', beta: true });
      expect(matched).toMatchObject({ value: true, reason: 'TARGETING_MATCH', flagKey: keys.bool });
      expect(matched.errorCode).toBeUndefined();
      // OFREP's reasons: the default value is STATIC, a weighted variant SPLIT.
      expect((await of.getBooleanDetails(keys.bool, true, { targetingKey: 'u1' })).reason).toBe('STATIC');

      const variant = await of.getStringDetails(keys.str, 'fallback', { targetingKey: 'u2' });
      expect(variant).toMatchObject({ value: 'green', reason: 'SPLIT', variant: 'only' });
      expect(await of.getNumberValue(keys.num, 0, { targetingKey: 'u' })).toBe(3);
      expect(await of.getNumberValue(keys.float, 0, { targetingKey: 'u' })).toBe(2.5);
      expect(await of.getObjectValue(keys.obj, {}, { targetingKey: 'u' })).toEqual({ layout: 'grid', columns: 3 });

      const disabled = await of.getBooleanDetails(keys.off, false, { targetingKey: 'u' });
      expect(disabled).toMatchObject({ value: true, reason: 'DISABLED' });

      const missing = await of.getBooleanDetails('no-such-flag', true, { targetingKey: 'u' });
      expect(missing).toMatchObject({ value: true, reason: 'ERROR', errorCode: ErrorCode.FLAG_NOT_FOUND });

      const mismatch = await of.getNumberDetails(keys.bool, 9, { targetingKey: 'u' });
      expect(mismatch).toMatchObject({ value: 9, reason: 'ERROR', errorCode: ErrorCode.TYPE_MISMATCH });

      // Environment from X-Environment.
      const prod = await client(`ofrep-prod-${listener}`, listener, {
        Authorization: `Bearer ${fx.readToken}`,
        'X-Service-Id': fx.serviceId,
        'X-Environment': 'production',
      });
      expect(await prod.getBooleanValue(keys.prod, false, { targetingKey: 'u' })).toBe(true);
      expect((await of.getBooleanDetails(keys.prod, false, { targetingKey: 'u' })).errorCode).toBe(ErrorCode.FLAG_NOT_FOUND);
    });
  }

  it('evaluates public flags without a credential and turns access errors into SDK errors', async () => {
    const anonymous = await client('ofrep-anon', 'data', { 'X-Service-Id': fx.serviceId });
    expect(await anonymous.getStringValue(keys.pub, 'x', { targetingKey: 'u' })).toBe('open');
    const denied = await anonymous.getBooleanDetails(keys.bool, false, { targetingKey: 'u' });
    expect(denied).toMatchObject({ value: false, reason: 'ERROR' });
    expect(denied.errorCode).toBeDefined();
  });
});

describe('OFREP over HTTP', () => {
  /** An OFREP request, its answer checked against the published schema. */
  const post = async (path: string, opts: { token?: string; headers?: Record<string, string>; body?: unknown; listener?: 'control' | 'data' } = {}) => {
    const res = await app.request('POST', `/api/ofrep/v1${path}`, {
      listener: opts.listener ?? 'data',
      token: opts.token,
      headers: { 'x-service-id': fx.serviceId, ...(opts.headers ?? {}) },
      body: opts.body ?? { context: { targetingKey: 'u' } },
    });
    if (path === '/evaluate/flags') expectOfrepBulk(res);
    else expectOfrepSingle(res);
    return res;
  };

  it('answers a single evaluation in the OFREP shape', async () => {
    const res = await post(`/evaluate/flags/${keys.str}`, { token: fx.readToken });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(res.body).toEqual({ key: keys.str, value: 'green', reason: 'SPLIT', variant: 'only', metadata: { flagVersion: 1 } });
  });

  it('uses 404 FLAG_NOT_FOUND, 400 for bad context or service header, and the OFREP error shape', async () => {
    const missing = await post('/evaluate/flags/nope', { token: fx.readToken });
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ key: 'nope', errorCode: 'FLAG_NOT_FOUND', errorDetails: expect.any(String) });

    const badContext = await post(`/evaluate/flags/${keys.bool}`, { token: fx.readToken, body: { context: 'not an object' } });
    expect(badContext.status).toBe(400);
    expect(badContext.body).toMatchObject({ key: keys.bool, errorCode: 'INVALID_CONTEXT' });

    const parse = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${keys.bool}`, {
      listener: 'data',
      token: fx.readToken,
      headers: { 'x-service-id': fx.serviceId, 'content-type': 'application/json' },
      rawBody: '{"context":',
    });
    expect(parse.status).toBe(400);
    expect(parse.body).toMatchObject({ key: keys.bool, errorCode: 'PARSE_ERROR' });
    expectOfrepSingle(parse);

    const noService = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${keys.bool}`, { listener: 'data', token: fx.readToken, body: {} });
    expect(noService.status).toBe(400);
    expectOfrepSingle(noService);
    expect(noService.body).toMatchObject({ key: keys.bool, errorCode: 'GENERAL', errorDetails: expect.stringContaining('X-Service-Id') });

    const badEnv = await post(`/evaluate/flags/${keys.bool}`, { token: fx.readToken, headers: { 'x-environment': 'qa' } });
    expect(badEnv.status).toBe(400);

    const anonymous = await post(`/evaluate/flags/${keys.bool}`);
    expect(anonymous.status).toBe(401);
    const foreign = await post(`/evaluate/flags/${keys.bool}`, { token: other.readToken });
    expect(foreign.status).toBe(404);
    const writeOnly = await post(`/evaluate/flags/${keys.bool}`, { token: fx.writeOnlyToken });
    expect(writeOnly.status).toBe(403);
  });

  it('refuses personal tokens with 403 PROVIDER_NOT_READY on both listeners', async () => {
    const pat = await personalToken(app, fx.owner, 'write');
    for (const listener of ['control', 'data'] as const) {
      const res = await post(`/evaluate/flags/${keys.bool}`, { token: pat, listener });
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ key: keys.bool, errorCode: 'PROVIDER_NOT_READY', errorDetails: expect.stringContaining('personal tokens') });
      const bulk = await post('/evaluate/flags', { token: pat, listener });
      expect(bulk.status).toBe(403);
      const config = await app.request('GET', '/api/ofrep/v1/configuration', { token: pat, listener });
      expect(config.status).toBe(403);
    }
  });

  it('answers bulk evaluation with every visible flag, an ETag and 304 when unchanged', async () => {
    const first = await post('/evaluate/flags', { token: fx.readToken });
    expect(first.status).toBe(200);
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^W\/".+"$/);
    const byKey = Object.fromEntries(first.body.flags.map((f: { key: string }) => [f.key, f]));
    expect(byKey[keys.bool]).toEqual({ key: keys.bool, value: false, reason: 'STATIC', metadata: { flagVersion: 1 } });
    expect(byKey[keys.str]).toMatchObject({ reason: 'SPLIT', variant: 'only' });
    expect(byKey[keys.off]).toMatchObject({ value: true, reason: 'DISABLED' });
    expect(byKey[keys.prod]).toBeUndefined();
    expect(Object.keys(byKey).sort()).toEqual([keys.bool, keys.str, keys.num, keys.float, keys.obj, keys.off, keys.pub].sort());

    const unchanged = await post('/evaluate/flags', { token: fx.readToken, headers: { 'if-none-match': etag } });
    expect(unchanged.status).toBe(304);
    expect(unchanged.text).toBe('');
    // Another context is another answer.
    const otherContext = await post('/evaluate/flags', { token: fx.readToken, headers: { 'if-none-match': etag }, body: { context: { targetingKey: 'v' } } });
    expect(otherContext.status).toBe(200);
    // A flag change changes the ETag.
    await fx.owner.request('POST', `/api/flags/${keys.num}/toggle?serviceId=${fx.serviceId}&environment=development`, { enabled: false });
    const deadline = Date.now() + 5_000;
    let changed;
    do {
      changed = await post('/evaluate/flags', { token: fx.readToken, headers: { 'if-none-match': etag } });
    } while (changed.status === 304 && Date.now() < deadline);
    expect(changed.status).toBe(200);
    expect(changed.body.flags.find((f: { key: string }) => f.key === keys.num)).toMatchObject({ reason: 'DISABLED' });
    await fx.owner.request('POST', `/api/flags/${keys.num}/toggle?serviceId=${fx.serviceId}&environment=development`, { enabled: true });

    // Anonymous callers get the public flags only.
    const anonymous = await post('/evaluate/flags');
    expect(anonymous.status).toBe(200);
    expect(anonymous.body.flags.map((f: { key: string }) => f.key)).toEqual([keys.pub]);
    const noService = await app.request('POST', '/api/ofrep/v1/evaluate/flags', { listener: 'data', body: {} });
    expect(noService.status).toBe(400);
    expect(noService.body).toMatchObject({ errorCode: 'GENERAL' });
    expectOfrepBulk(noService);
  });

  it('publishes the provider configuration with an ETag on both paths', async () => {
    for (const path of ['/api/ofrep/v1/configuration', '/api/ofrep/v1/metadata']) {
      const res = await app.request('GET', path, { listener: 'data' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        name: expect.any(String),
        capabilities: {
          cacheInvalidation: {
            polling: { enabled: true, minPollingIntervalMs: expect.any(Number) },
            eventStreams: { enabled: true, types: ['sse'], inactivityDelaySec: 120, for: expect.any(String) },
          },
          flagEvaluation: {
            supportedTypes: ['boolean', 'string', 'int', 'float', 'object'],
            reasons: { STATIC: expect.any(String), SPLIT: expect.any(String), TARGETING_MATCH: expect.any(String), DISABLED: expect.any(String) },
            errorCodes: expect.objectContaining({ FLAG_NOT_FOUND: expect.any(String), GENERAL: expect.any(String) }),
          },
        },
      });
      const again = await app.request('GET', path, { listener: 'data', headers: { 'if-none-match': res.headers.get('etag')! } });
      expect(again.status).toBe(304);
    }
  });
});
