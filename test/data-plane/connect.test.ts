import { fromJson } from '@bufbuild/protobuf';
import { ValueSchema } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient, type Client, type Transport } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { EvaluationService, type EventStreamResponse } from '../../api/gen/flags/v1/evaluation_pb';
import { startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, personalToken, untilEvaluated, type DataPlaneFixture } from './support';

let app: TestApp;
let fx: DataPlaneFixture;
let other: DataPlaneFixture;
const keys: Record<string, string> = {};

beforeAll(async () => {
  app = await startTestApp({ STREAM_HEARTBEAT_MS: '300' });
  fx = await createFixture(app);
  other = await createFixture(app);
  const make = async (name: string, body: Record<string, unknown>) => {
    keys[name] = (await createFlag(fx.owner, fx.serviceId, body)).key;
  };
  await make('bool', { type: 'boolean', enabled: true, defaultValue: false, targeting: [{ conditions: [{ property: 'beta', operator: 'equals', value: true }], value: true }] });
  await make('str', { type: 'string', enabled: true, defaultValue: 'red', variants: [{ name: 'only', value: 'green', weight: 100 }] });
  await make('int', { type: 'number', enabled: true, defaultValue: 42 });
  await make('float', { type: 'number', enabled: true, defaultValue: 2.5 });
  await make('obj', { type: 'object', enabled: true, defaultValue: { layout: 'grid', columns: [1, 2] } });
  await make('pub', { type: 'string', enabled: true, isPublic: true, defaultValue: 'open' });
  await untilEvaluated(app, { flagKey: keys.pub, serviceId: fx.serviceId }, (r) => r.value === 'open');
});
afterAll(() => app?.stop());

type Protocol = 'connect-json' | 'connect-binary' | 'grpc-web';
const PROTOCOLS: Protocol[] = ['connect-json', 'connect-binary', 'grpc-web'];

function transport(protocol: Protocol, listener: 'control' | 'data' = 'data'): Transport {
  const base = app.urls[listener];
  if (protocol === 'grpc-web') return createGrpcWebTransport({ baseUrl: `${base}/api/grpc-web`, httpVersion: '1.1' });
  return createConnectTransport({ baseUrl: `${base}/api/connect`, httpVersion: '1.1', useBinaryFormat: protocol === 'connect-binary' });
}

const auth = (token: string) => ({ headers: { Authorization: `Bearer ${token}` } });

async function expectCode(promise: Promise<unknown>, code: Code) {
  const error = await promise.then(
    () => undefined,
    (e) => e,
  );
  expect(error).toBeInstanceOf(ConnectError);
  expect(ConnectError.from(error).code).toBe(code);
}

describe.each(PROTOCOLS)('EvaluationService over %s', (protocol) => {
  let client: Client<typeof EvaluationService>;
  beforeAll(() => {
    client = createClient(EvaluationService, transport(protocol));
  });

  it('serves the control listener as well as the data listener', async () => {
    const control = createClient(EvaluationService, transport(protocol, 'control'));
    const res = await control.resolveString({ flagKey: keys.str, serviceId: fx.serviceId, context: { targetingKey: 'u' } }, auth(fx.readToken));
    expect(res).toMatchObject({ value: 'green', reason: 'VARIANT', variant: 'only' });
  });

  it('resolves each type with reasons and variants', async () => {
    const base = { serviceId: fx.serviceId, environment: 'development' };
    const bool = await client.resolveBoolean({ ...base, flagKey: keys.bool, context: { targetingKey: 'u', beta: true } }, auth(fx.readToken));
    expect(bool).toMatchObject({ value: true, reason: 'TARGETING_MATCH', variant: '', errorCode: '' });
    const str = await client.resolveString({ ...base, flagKey: keys.str, context: { targetingKey: 'u' } }, auth(fx.readToken));
    expect(str).toMatchObject({ value: 'green', reason: 'VARIANT', variant: 'only' });
    const int = await client.resolveInt({ ...base, flagKey: keys.int, context: {} }, auth(fx.readToken));
    expect(int).toMatchObject({ value: 42n, reason: 'DEFAULT' });
    const float = await client.resolveFloat({ ...base, flagKey: keys.float, context: {} }, auth(fx.readToken));
    expect(float).toMatchObject({ value: 2.5, reason: 'DEFAULT' });
    const obj = await client.resolveObject({ ...base, flagKey: keys.obj, context: {} }, auth(fx.readToken));
    expect(obj.reason).toBe('DEFAULT');
    expect(obj.value).toEqual(fromJson(ValueSchema, { layout: 'grid', columns: [1, 2] }));
  });

  it('answers evaluation errors in the response: FLAG_NOT_FOUND with the default, TYPE_MISMATCH, non-integer ints', async () => {
    const missing = await client.resolveBoolean({ flagKey: 'nope', serviceId: fx.serviceId, defaultValue: true }, auth(fx.readToken));
    expect(missing).toMatchObject({ value: true, reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND' });
    const mismatch = await client.resolveString({ flagKey: keys.bool, serviceId: fx.serviceId, defaultValue: 'd' }, auth(fx.readToken));
    expect(mismatch).toMatchObject({ value: 'd', reason: 'ERROR', errorCode: 'TYPE_MISMATCH' });
    const fractional = await client.resolveInt({ flagKey: keys.float, serviceId: fx.serviceId, defaultValue: 7n }, auth(fx.readToken));
    expect(fractional).toMatchObject({ value: 7n, reason: 'ERROR', errorCode: 'TYPE_MISMATCH' });
  });

  it('resolves all visible flags, or the named ones', async () => {
    const all = await client.resolveAll({ serviceId: fx.serviceId, context: { targetingKey: 'u' } }, auth(fx.readToken));
    expect(Object.keys(all.flags).sort()).toEqual(Object.values(keys).sort());
    expect(all.flags[keys.str]).toMatchObject({ reason: 'VARIANT', variant: 'only', type: 'string', value: { case: 'stringValue', value: 'green' } });
    expect(all.flags[keys.int].value).toEqual({ case: 'doubleValue', value: 42 });
    const some = await client.resolveAll({ serviceId: fx.serviceId, flagKeys: [keys.bool, 'ghost'] }, auth(fx.readToken));
    expect(Object.keys(some.flags).sort()).toEqual([keys.bool, 'ghost'].sort());
    expect(some.flags.ghost).toMatchObject({ reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND', value: { case: undefined } });
    const anonymous = await client.resolveAll({ serviceId: fx.serviceId });
    expect(Object.keys(anonymous.flags)).toEqual([keys.pub]);
  });

  it('maps access failures to Connect codes', async () => {
    await expectCode(client.resolveBoolean({ flagKey: keys.bool, serviceId: fx.serviceId }), Code.Unauthenticated);
    await expectCode(client.resolveBoolean({ flagKey: keys.bool, serviceId: fx.serviceId }, auth('fgr_bogus')), Code.Unauthenticated);
    await expectCode(client.resolveBoolean({ flagKey: keys.bool, serviceId: fx.serviceId }, auth(other.readToken)), Code.NotFound);
    await expectCode(client.resolveBoolean({ flagKey: keys.bool, serviceId: fx.serviceId }, auth(fx.writeOnlyToken)), Code.PermissionDenied);
    await expectCode(client.resolveBoolean({ flagKey: keys.bool, serviceId: 'svc_none' }, auth(fx.readToken)), Code.NotFound);
    await expectCode(client.resolveBoolean({ flagKey: '', serviceId: fx.serviceId }, auth(fx.readToken)), Code.InvalidArgument);
    await expectCode(client.resolveBoolean({ flagKey: keys.bool, serviceId: fx.serviceId, environment: 'qa' }, auth(fx.readToken)), Code.InvalidArgument);
    // Public flags need no credential.
    expect((await client.resolveString({ flagKey: keys.pub, serviceId: fx.serviceId })).value).toBe('open');
  });

  it('refuses personal access tokens with PERMISSION_DENIED on both listeners', async () => {
    const pat = await personalToken(app, fx.owner, 'admin');
    for (const listener of ['control', 'data'] as const) {
      const c = createClient(EvaluationService, transport(protocol, listener));
      await expectCode(c.resolveBoolean({ flagKey: keys.pub, serviceId: fx.serviceId }, auth(pat)), Code.PermissionDenied);
      await expectCode(c.resolveAll({ serviceId: fx.serviceId }, auth(pat)), Code.PermissionDenied);
    }
  });

  it('streams connected, flag updates with the full flag, heartbeats, and resumes from last_event_id', async () => {
    const abort = new AbortController();
    const stream = client.eventStream({ serviceId: fx.serviceId, environment: 'development' }, { ...auth(fx.readToken), signal: abort.signal });
    const iterator = stream[Symbol.asyncIterator]();
    const next = async (): Promise<EventStreamResponse> => {
      for (;;) {
        const { value, done } = await iterator.next();
        if (done) throw new Error('stream ended');
        if (value.type !== 'heartbeat') return value;
      }
    };
    const connected = await next();
    expect(connected).toMatchObject({ type: 'connected', serviceId: fx.serviceId });
    const toggle = await fx.owner.request('POST', `/api/flags/${keys.bool}/toggle?serviceId=${fx.serviceId}&environment=development`, { enabled: false });
    expect(toggle.status).toBe(200);
    const update = await next();
    expect(update).toMatchObject({ type: 'flag-update', flagKey: keys.bool, environment: 'development', event: 'flag.toggled' });
    expect(update.flag).toMatchObject({ key: keys.bool, enabled: false, serviceId: fx.serviceId, updatedAt: expect.any(String) });
    // A heartbeat arrives within a few intervals when nothing changes.
    let sawHeartbeat = false;
    for (let i = 0; i < 5 && !sawHeartbeat; i++) sawHeartbeat = (await iterator.next()).value?.type === 'heartbeat';
    expect(sawHeartbeat).toBe(true);
    abort.abort();

    // Changes made while disconnected are replayed after last_event_id.
    await fx.owner.request('POST', `/api/flags/${keys.bool}/toggle?serviceId=${fx.serviceId}&environment=development`, { enabled: true });
    await untilEvaluated(app, { flagKey: keys.bool, serviceId: fx.serviceId }, (r) => r.reason === 'DEFAULT' && r.value === false, { token: fx.readToken });
    const resumed = client.eventStream({ serviceId: fx.serviceId, lastEventId: update.id }, auth(fx.readToken))[Symbol.asyncIterator]();
    const first = (await resumed.next()).value as EventStreamResponse;
    expect(first.type).toBe('connected');
    let replayed: EventStreamResponse | undefined;
    while (!replayed) {
      const m = (await resumed.next()).value as EventStreamResponse;
      if (m.type === 'flag-update') replayed = m;
    }
    expect(replayed).toMatchObject({ flagKey: keys.bool, flag: expect.objectContaining({ enabled: true }) });
    await resumed.return?.();
  });
});

describe('Connect JSON routes', () => {
  it('POST /api/connect/evaluate answers protobuf-shaped JSON and honours Connect-Protocol-Version', async () => {
    for (const listener of ['control', 'data'] as const) {
      const res = await app.request('POST', '/api/connect/evaluate', {
        listener,
        token: fx.readToken,
        headers: { 'connect-protocol-version': '1' },
        body: { flagKey: keys.str, serviceId: fx.serviceId, context: { targetingKey: 'u' } },
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ flagKey: keys.str, value: 'green', reason: 'VARIANT', variant: 'only', metadata: {} });
    }
    const badVersion = await app.request('POST', '/api/connect/evaluate', {
      token: fx.readToken,
      headers: { 'connect-protocol-version': '2' },
      body: { flagKey: keys.str, serviceId: fx.serviceId },
    });
    expect(badVersion.status).toBe(400);
    const unknownField = await app.request('POST', '/api/connect/evaluate', { token: fx.readToken, body: { flagKey: keys.str, serviceId: fx.serviceId, x: 1 } });
    expect(unknownField.status).toBe(400);
    const anonymous = await app.request('POST', '/api/connect/evaluate', { body: { flagKey: keys.str, serviceId: fx.serviceId } });
    expect(anonymous.status).toBe(401);
    const pat = await personalToken(app, fx.viewer, 'read');
    const refused = await app.request('POST', '/api/connect/evaluate', { listener: 'data', token: pat, body: { flagKey: keys.str, serviceId: fx.serviceId } });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe('FORBIDDEN');
  });

  it('POST /api/connect/bulk-evaluate answers ResolveAllResponse JSON', async () => {
    const res = await app.request('POST', '/api/connect/bulk-evaluate', {
      listener: 'data',
      token: fx.readToken,
      body: { serviceId: fx.serviceId, context: { targetingKey: 'u', beta: true }, flagKeys: [keys.bool, keys.int, keys.obj, 'ghost'] },
    });
    expect(res.status).toBe(200);
    expect(res.body.flags[keys.bool]).toMatchObject({ reason: 'TARGETING_MATCH', type: 'boolean' });
    expect(res.body.flags[keys.int]).toEqual({ reason: 'DEFAULT', doubleValue: 42, metadata: {}, type: 'number' });
    expect(res.body.flags[keys.obj].objectValue).toEqual({ layout: 'grid', columns: [1, 2] });
    expect(res.body.flags.ghost).toEqual({ reason: 'ERROR', metadata: {}, errorCode: 'FLAG_NOT_FOUND', errorMessage: expect.any(String) });
    const foreign = await app.request('POST', '/api/connect/bulk-evaluate', { token: other.readToken, body: { serviceId: fx.serviceId, flagKeys: [keys.bool] } });
    expect(foreign.status).toBe(404);
    const everything = await app.request('POST', '/api/connect/bulk-evaluate', { token: fx.readToken, body: { serviceId: fx.serviceId } });
    expect(Object.keys(everything.body.flags).length).toBeGreaterThanOrEqual(6);
  });
});
