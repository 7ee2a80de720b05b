import { randomBytes } from 'node:crypto';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { hashTargetingKey } from '../../api/features/evaluation/recorder';
import { EvaluationService } from '../../api/gen/flags/v1/evaluation_pb';
import { startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';

// Bound project API tokens (docs/api-reference.md#project-api-tokens): created with
// `scope: {serviceId, environment}`, read-only, and read only that service and environment.

let app: TestApp;
let fx: DataPlaneFixture;
let other: DataPlaneFixture;
let secondServiceId: string;
let devKey: string;
let prodKey: string;

const tokensPath = (projectId = fx.projectId) => `/api/projects/${projectId}/tokens`;
const name = () => `bound-${randomBytes(3).toString('hex')}`;

beforeAll(async () => {
  app = await startTestApp();
  fx = await createFixture(app);
  other = await createFixture(app);
  const second = await fx.owner.request('POST', '/api/services', { projectId: fx.projectId, name: `svc-${randomBytes(3).toString('hex')}` });
  expect(second.status).toBe(201);
  secondServiceId = second.body.id;
  devKey = (await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'dev-value' })).key;
  prodKey = (await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'prod-value', environment: 'production' })).key;
  await untilEvaluated(app, { flagKey: devKey, serviceId: fx.serviceId }, (r) => r.value === 'dev-value', { token: fx.readToken });
  await untilEvaluated(app, { flagKey: prodKey, serviceId: fx.serviceId, environment: 'production' }, (r) => r.value === 'prod-value', { token: fx.readToken });
});
afterAll(() => app?.stop());

async function bound(environment = 'production', serviceId = fx.serviceId) {
  const res = await fx.owner.request('POST', tokensPath(), { name: name(), permissions: { read: true }, scope: { serviceId, environment } });
  expect(res.status).toBe(201);
  return res.body as { token: { id: string; scope: unknown }; value: string };
}

describe('creating bound project tokens', () => {
  it('shows the scope on the created and listed record (null when unbound), for opaque and JWT tokens, and audits it', async () => {
    const scope = { serviceId: fx.serviceId, environment: 'production' };
    const opaque = await fx.owner.request('POST', tokensPath(), { name: 'flagd', permissions: { read: true }, scope });
    expect(opaque.status).toBe(201);
    expect(opaque.body.token).toMatchObject({ tokenType: 'opaque', permissions: { read: true, write: false, delete: false }, scope });

    const jwt = await fx.owner.request('POST', tokensPath(), { name: 'flagd jwt', scopes: ['read'], scope });
    expect(jwt.status).toBe(201);
    expect(jwt.body.token).toMatchObject({ tokenType: 'jwt', scopes: ['read'], scope });

    const plain = await fx.owner.request('POST', tokensPath(), { name: 'plain', permissions: { read: true } });
    expect(plain.status).toBe(201);
    expect(plain.body.token.scope).toBeNull();

    const list = await fx.owner.request('GET', tokensPath());
    expect(list.status).toBe(200);
    const byId = new Map(list.body.tokens.map((t: { id: string }) => [t.id, t]));
    expect(byId.get(opaque.body.token.id)).toMatchObject({ scope });
    expect(byId.get(jwt.body.token.id)).toMatchObject({ scope });
    expect(byId.get(plain.body.token.id)).toMatchObject({ scope: null });

    const [audit] = await app.platform.db.sql`
      SELECT after FROM audit_logs WHERE resource_id = ${opaque.body.token.id} AND action = 'token.create'`;
    expect(audit.after.scope).toEqual(scope);
  });

  it.each([
    ['an unknown service', () => ({ permissions: { read: true }, scope: { serviceId: 'svc_nope', environment: 'production' } }), 'body.scope.serviceId'],
    ["another project's service", () => ({ permissions: { read: true }, scope: { serviceId: other.serviceId, environment: 'production' } }), 'body.scope.serviceId'],
    ['a bad environment', () => ({ permissions: { read: true }, scope: { serviceId: fx.serviceId, environment: 'prod' } }), 'body.scope.environment'],
    ['a missing environment', () => ({ permissions: { read: true }, scope: { serviceId: fx.serviceId } }), 'body.scope.environment'],
    ['write permission', () => ({ permissions: { read: true, write: true }, scope: { serviceId: fx.serviceId, environment: 'production' } }), 'body.permissions'],
    ['a JWT with write', () => ({ scopes: ['read', 'write'], scope: { serviceId: fx.serviceId, environment: 'production' } }), 'body.scopes'],
  ])('refuses %s with 400 naming the field, creating nothing', async (_what, body, path) => {
    const tokenName = name();
    const res = await fx.owner.request('POST', tokensPath(), { name: tokenName, ...body() });
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual(expect.arrayContaining([expect.objectContaining({ path })]));
    const [{ count }] = await app.platform.db.sql`SELECT count(*)::int AS count FROM project_tokens WHERE name = ${tokenName}`;
    expect(count).toBe(0);
  });

  it('needs the same right as any token: a viewer cannot create one', async () => {
    const res = await fx.viewer.request('POST', tokensPath(), { name: name(), permissions: { read: true }, scope: { serviceId: fx.serviceId, environment: 'production' } });
    expect(res.status).toBe(403);
  });

  it('is revocable: then 401 on the data plane', async () => {
    const { token, value } = await bound();
    const body = { flagKey: prodKey };
    expect((await app.request('POST', '/api/flags/evaluate', { body, token: value, listener: 'data' })).status).toBe(200);
    expect((await fx.owner.request('DELETE', `${tokensPath()}/${token.id}`)).status).toBe(204);
    expect((await app.request('POST', '/api/flags/evaluate', { body, token: value, listener: 'data' })).status).toBe(401);
    const list = await fx.owner.request('GET', tokensPath());
    expect(list.body.tokens.map((t: { id: string }) => t.id)).not.toContain(token.id);
  });
});

describe('a bound token on the data plane', () => {
  let value: string;
  beforeAll(async () => {
    value = (await bound('production')).value;
  });

  it('evaluates with no service or environment named (REST single and batch)', async () => {
    const one = await app.request('POST', '/api/flags/evaluate', { body: { flagKey: prodKey }, token: value, listener: 'data' });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ flagKey: prodKey, value: 'prod-value' });
    const batch = await app.request('POST', '/api/flags/evaluate/batch', { body: { flags: [{ flagKey: prodKey }] }, token: value, listener: 'data' });
    expect(batch.status).toBe(200);
    expect(batch.body.results[0]).toMatchObject({ flagKey: prodKey, value: 'prod-value' });
    // Naming its own service and environment is the same.
    const named = await app.request('POST', '/api/flags/evaluate', {
      body: { flagKey: prodKey, serviceId: fx.serviceId, environment: 'production' },
      token: value,
      listener: 'data',
    });
    expect(named.body).toMatchObject({ value: 'prod-value' });
  });

  it('evaluates over OFREP (bulk and single) without the X-Service-Id and X-Environment headers', async () => {
    const bulk = await app.request('POST', '/api/ofrep/v1/evaluate/flags', { body: { context: {} }, token: value, listener: 'data' });
    expect(bulk.status).toBe(200);
    expect(bulk.body.flags.map((f: { key: string }) => f.key)).toContain(prodKey);
    expect(bulk.body.flags.map((f: { key: string }) => f.key)).not.toContain(devKey);
    const single = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${prodKey}`, { body: { context: {} }, token: value, listener: 'data' });
    expect(single.status).toBe(200);
    expect(single.body).toMatchObject({ key: prodKey, value: 'prod-value' });
  });

  it('opens the SSE stream and reads the SDK config of its own service and environment', async () => {
    const abort = new AbortController();
    const res = await fetch(`${app.urls.data}/api/flags/stream`, { headers: { authorization: `Bearer ${value}` }, signal: abort.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    abort.abort();
    const config = await app.request('GET', '/api/sdk-config', { token: value, listener: 'data' });
    expect(config.status).toBe(200);
    expect(config.body).toMatchObject({ serviceId: fx.serviceId, environment: 'production' });
  });

  it('is refused like a token of another project when the request names another service or environment', async () => {
    const refused = { error: 'Not Found', message: 'Service not found' };
    const otherService = await app.request('POST', '/api/flags/evaluate', { body: { flagKey: devKey, serviceId: secondServiceId }, token: value, listener: 'data' });
    expect(otherService.status).toBe(404);
    expect(otherService.body).toMatchObject(refused);
    const otherEnv = await app.request('POST', '/api/flags/evaluate', { body: { flagKey: devKey, environment: 'development' }, token: value, listener: 'data' });
    expect(otherEnv.status).toBe(404);
    expect(otherEnv.body).toMatchObject(refused);
    const ofrep = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${devKey}`, {
      body: { context: {} },
      token: value,
      listener: 'data',
      headers: { 'x-environment': 'development' },
    });
    expect(ofrep.status).toBe(404);
    const stream = await app.request('GET', `/api/flags/stream?serviceId=${secondServiceId}`, { token: value, listener: 'data' });
    expect(stream.status).toBe(404);

    // The same answer a token of another project gets for a non-public flag.
    const foreign = await app.request('POST', '/api/flags/evaluate', { body: { flagKey: devKey, serviceId: fx.serviceId }, token: other.readToken, listener: 'data' });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject(refused);
  });

  it('evaluates over Connect JSON without serviceId or environment, and is refused for another environment', async () => {
    const one = await app.request('POST', '/api/connect/evaluate', { body: { flagKey: prodKey }, token: value, listener: 'data' });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ flagKey: prodKey, value: 'prod-value' });
    const bulk = await app.request('POST', '/api/connect/bulk-evaluate', { body: {}, token: value, listener: 'data' });
    expect(bulk.status).toBe(200);
    expect(Object.keys(bulk.body.flags)).toContain(prodKey);
    const otherEnv = await app.request('POST', '/api/connect/evaluate', { body: { flagKey: devKey, environment: 'development' }, token: value, listener: 'data' });
    expect(otherEnv.status).toBe(404);
  });

  it.each(['connect', 'grpc-web'])('resolves over %s RPC with an empty service_id and environment', async (protocol) => {
    const base = app.urls.data;
    const transport =
      protocol === 'grpc-web'
        ? createGrpcWebTransport({ baseUrl: `${base}/api/grpc-web`, httpVersion: '1.1' })
        : createConnectTransport({ baseUrl: `${base}/api/connect`, httpVersion: '1.1' });
    const client = createClient(EvaluationService, transport);
    const headers = { headers: { Authorization: `Bearer ${value}` } };
    const res = await client.resolveString({ flagKey: prodKey, context: {} }, headers);
    expect(res).toMatchObject({ value: 'prod-value' });
    const refused = await client.resolveString({ flagKey: devKey, serviceId: secondServiceId, context: {} }, headers).then(
      () => undefined,
      (e) => e,
    );
    expect(ConnectError.from(refused).code).toBe(Code.NotFound);
    const otherEnv = await client.resolveString({ flagKey: devKey, environment: 'development', context: {} }, headers).then(
      () => undefined,
      (e) => e,
    );
    expect(ConnectError.from(otherEnv).code).toBe(Code.NotFound);
  });

  it('works as a JWT too, its scope surviving a refresh', async () => {
    const created = await fx.owner.request('POST', tokensPath(), { name: name(), scopes: ['read'], scope: { serviceId: fx.serviceId, environment: 'production' } });
    expect(created.status).toBe(201);
    const first = await app.request('POST', '/api/flags/evaluate', { body: { flagKey: prodKey }, token: created.body.accessToken, listener: 'data' });
    expect(first.body).toMatchObject({ value: 'prod-value' });
    const refreshed = await app.request('POST', `${tokensPath()}/refresh`, { token: created.body.refreshToken });
    expect(refreshed.status).toBe(200);
    const second = await app.request('POST', '/api/flags/evaluate', { body: { flagKey: prodKey }, token: refreshed.body.accessToken, listener: 'data' });
    expect(second.body).toMatchObject({ value: 'prod-value' });
    const otherService = await app.request('POST', '/api/flags/evaluate', {
      body: { flagKey: devKey, serviceId: secondServiceId },
      token: refreshed.body.accessToken,
      listener: 'data',
    });
    expect(otherService.status).toBe(404);
  });

  it('sends outcome events only for its own service', async () => {
    const events = [{ event: 'signup', targetingKey: 'u1' }];
    const own = await app.request('POST', '/api/analytics/track', { listener: 'data', token: value, body: { serviceId: fx.serviceId, environment: 'production', events } });
    expect(own.status).toBeLessThan(300);
    const another = await app.request('POST', '/api/analytics/track', { listener: 'data', token: value, body: { serviceId: secondServiceId, environment: 'production', events } });
    expect(another.status).toBe(404);
    expect(another.body).toMatchObject({ message: 'Service not found' });
  });

  it('records outcome events under its own environment when none is named, and refuses another environment', async () => {
    const targetingKey = `env-${randomBytes(3).toString('hex')}`;
    const events = [{ event: 'bound-env', targetingKey }];
    const unnamed = await app.request('POST', '/api/analytics/track', { listener: 'data', token: value, body: { serviceId: fx.serviceId, events } });
    expect(unnamed.status).toBe(202);
    const otherEnvironment = await app.request('POST', '/api/analytics/track', { listener: 'data', token: value, body: { serviceId: fx.serviceId, environment: 'development', events } });
    expect(otherEnvironment.status).toBe(404);
    const telemetry = await app.request('POST', '/api/analytics/sdk-telemetry', { listener: 'data', token: value, body: { serviceId: fx.serviceId, environment: 'staging' } });
    expect(telemetry.status).toBe(404);
    await app.platform.analyticsWriter.flush();
    const stored = await app.platform.analytics.client.query({
      query: 'SELECT environment FROM outcome_events WHERE service_id = {s:String} AND targeting_key_hash = {u:String}',
      query_params: { s: fx.serviceId, u: hashTargetingKey(targetingKey) },
      format: 'JSONEachRow',
    });
    expect(await stored.json()).toEqual([{ environment: 'production' }]);
  });

  it("cannot read another project's service", async () => {
    const res = await app.request('POST', '/api/flags/evaluate', { body: { flagKey: devKey, serviceId: other.serviceId }, token: value, listener: 'data' });
    expect(res.status).toBe(404);
    const ofrep = await app.request('POST', '/api/ofrep/v1/evaluate/flags', { body: {}, token: value, listener: 'data', headers: { 'x-service-id': other.serviceId } });
    expect(ofrep.status).toBe(404);
  });

  it('is refused (403) on management routes, even reads', async () => {
    const write = await app.request('PATCH', `/api/projects/${fx.projectId}`, { token: value, body: { description: 'x' } });
    expect(write.status).toBe(403);
    expect(write.body.message).toMatch(/bound to a service and environment/);
    const read = await app.request('GET', `/api/projects/${fx.projectId}`, { token: value });
    expect(read.status).toBe(403);
  });

  it('leaves unbound tokens as they were: a missing serviceId is still a 400', async () => {
    const res = await app.request('POST', '/api/flags/evaluate', { body: { flagKey: devKey }, token: fx.readToken, listener: 'data' });
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([expect.objectContaining({ path: 'body.serviceId' })]);
  });
});
