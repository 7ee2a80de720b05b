import http2 from 'node:http2';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { compressionGzip, createGrpcTransport } from '@connectrpc/connect-node';
import { ResolveBooleanRequestSchema, ResolveBooleanResponseSchema, Service as EvaluationV1 } from '../../api/gen/flagd/evaluation/v1/evaluation_pb';
import { Service as EvaluationV2 } from '../../api/gen/flagd/evaluation/v2/evaluation_pb';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { boundToken, evaluationV1, evaluationV2, failure, selector } from './support';

/**
 * The lean gRPC path (docs/data-plane.md#the-lean-grpc-path): unary Resolve<Type> calls over
 * gRPC answered straight from the HTTP/2 stream must answer exactly as connect-node does, which
 * still serves Connect and gzip-compressed gRPC: the same value, variant and reason, or the same
 * status code and message, for every kind of request.
 */

const PER_TOKEN_LIMIT = 400;

let app: TestApp;
let fx: DataPlaneFixture;
let token: string;
const keys: Record<string, string> = {};

beforeAll(async () => {
  app = await startTestApp({ RATE_LIMIT_PER_TOKEN: String(PER_TOKEN_LIMIT), RATE_LIMIT_PER_IP: '100000' });
  fx = await createFixture(app);
  token = (await boundToken(fx)).value;
  const flags: Record<string, Record<string, unknown>> = {
    boolean: { type: 'boolean', enabled: true, defaultValue: true },
    off: { type: 'boolean', enabled: false, defaultValue: false },
    string: {
      type: 'string',
      enabled: true,
      defaultValue: 'plain',
      targeting: [{ id: 'staff', conditions: [{ property: 'email', operator: 'ends_with', value: '@staff.example.com' }], value: 'staff-value' }],
      variants: [
        { name: 'red', value: 'R', weight: 50 },
        { name: 'green', value: 'G', weight: 50 },
      ],
    },
    float: { type: 'number', enabled: true, defaultValue: 1.5 },
    int: { type: 'number', enabled: true, defaultValue: 7 },
    object: { type: 'object', enabled: true, defaultValue: { limit: 3 } },
  };
  for (const [name, body] of Object.entries(flags)) keys[name] = (await createFlag(fx.owner, fx.serviceId, body)).key;
  for (const key of Object.values(keys)) await untilEvaluated(app, { flagKey: key, serviceId: fx.serviceId, context: { targetingKey: 'warm' } }, (r) => r.reason !== 'ERROR', { token: fx.readToken });
});
afterAll(() => app?.stop());

type Method = 'resolveBoolean' | 'resolveString' | 'resolveFloat' | 'resolveInt' | 'resolveObject';
/** How each path is reached: gRPC (the lean path), gzip-compressed gRPC and Connect over HTTP/1.1 (connect-node). */
const COLUMNS = ['grpc', 'grpc-gzip', 'connect-http1'] as const;
type Column = (typeof COLUMNS)[number];

function clients(column: Column) {
  if (column === 'grpc-gzip') {
    const transport = createGrpcTransport({ baseUrl: app.urls.flagd!, sendCompression: compressionGzip });
    return { v1: createClient(EvaluationV1, transport), v2: createClient(EvaluationV2, transport) };
  }
  const protocol = column === 'grpc' ? 'grpc' : 'connect-http1';
  return { v1: evaluationV1(app, protocol), v2: evaluationV2(app, protocol) };
}

/** What a call answered: the result's fields, or the error's code and message. */
async function outcome(column: Column, version: 'v1' | 'v2', method: Method, flagKey: string, context: Record<string, unknown>, headers: Record<string, string>) {
  const client = clients(column)[version] as unknown as Record<Method, (req: unknown, opts: unknown) => Promise<{ value: unknown; variant: string; reason: string }>>;
  try {
    const r = await client[method]({ flagKey, context }, { headers });
    return { value: r.value, variant: r.variant, reason: r.reason };
  } catch (error) {
    const e = ConnectError.from(error);
    return { code: Code[e.code], message: e.rawMessage };
  }
}

async function everyColumn(method: Method, flagKey: string, context: Record<string, unknown>, headers: Record<string, string>) {
  const answers: Record<string, unknown> = {};
  for (const column of COLUMNS) for (const version of ['v1', 'v2'] as const) answers[`${column} ${version}`] = await outcome(column, version, method, flagKey, context, headers);
  return answers;
}

const same = (answers: Record<string, unknown>) => Object.values(answers).map((a) => JSON.stringify(a, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v)));

describe('the lean gRPC path answers as connect-node', () => {
  const cases: [string, Method, string, Record<string, unknown>, string | undefined][] = [
    ['a boolean', 'resolveBoolean', 'boolean', { targetingKey: 'u1' }, undefined],
    ['a string with variants but no targeting key: TARGETING_KEY_MISSING', 'resolveString', 'string', {}, 'InvalidArgument'],
    ["a string by a rule (variant rule:<id>)", 'resolveString', 'string', { targetingKey: 'u1', email: 'ann@staff.example.com' }, undefined],
    ['a string by a weighted variant', 'resolveString', 'string', { targetingKey: 'u1' }, undefined],
    ['a float', 'resolveFloat', 'float', { targetingKey: 'u1' }, undefined],
    ['an integer', 'resolveInt', 'int', { targetingKey: 'u1' }, undefined],
    ['an integer asked of a float flag: TYPE_MISMATCH', 'resolveInt', 'float', { targetingKey: 'u1' }, 'InvalidArgument'],
    ['an object', 'resolveObject', 'object', { targetingKey: 'u1', nested: { a: [1, 'two', null] } }, undefined],
    ['a disabled flag', 'resolveBoolean', 'off', { targetingKey: 'u1' }, undefined],
    ['a flag that does not exist: NOT_FOUND', 'resolveBoolean', 'missing', {}, 'NotFound'],
    ['a boolean asked of a string flag: TYPE_MISMATCH', 'resolveBoolean', 'string', { targetingKey: 'u1' }, 'InvalidArgument'],
    ['an empty flag key', 'resolveBoolean', 'empty', {}, 'InvalidArgument'],
  ];

  it.each(cases)('%s', async (_name, method, flag, context, code) => {
    const flagKey = flag === 'missing' ? 'no-such-flag' : flag === 'empty' ? '' : keys[flag];
    const answers = await everyColumn(method, flagKey, context, { 'flagd-selector': token });
    expect(new Set(same(answers)).size).toBe(1);
    const first = Object.values(answers)[0] as { code?: string; reason?: string };
    if (code === undefined) expect(first.code).toBeUndefined();
    else expect(first.code).toBe(code);
  });

  it('answers the credential errors alike: no selector, a bad one, a revoked token', async () => {
    const revoked = await boundToken(fx);
    expect((await fx.owner.request('DELETE', `/api/projects/${fx.projectId}/tokens/${revoked.token.id}`)).status).toBe(204);
    const refused: Record<string, string>[] = [{}, { 'flagd-selector': 'not-a-token' }, { 'flagd-selector': 'flagSetId=' }, { authorization: 'Basic abc' }, { 'flagd-selector': revoked.value }];
    for (const headers of refused) {
      const answers = await everyColumn('resolveBoolean', keys.boolean, {}, headers);
      expect(new Set(same(answers)).size).toBe(1);
      expect(Object.values(answers)[0]).toMatchObject({ code: 'Unauthenticated' });
    }
  });

  it('accepts the credential as flagSetId=<token> and as a bearer token', async () => {
    const accepted: Record<string, string>[] = [{ 'flagd-selector': `flagSetId=${token}` }, { authorization: `Bearer ${token}` }];
    for (const headers of accepted) {
      const answers = await everyColumn('resolveBoolean', keys.boolean, {}, headers);
      expect(new Set(same(answers)).size).toBe(1);
      expect(Object.values(answers)[0]).toMatchObject({ value: true, reason: 'STATIC' });
    }
  });

  it('refuses an oversized request RESOURCE_EXHAUSTED on every path', async () => {
    const context = { targetingKey: 'big', blob: 'x'.repeat(100 * 1024) };
    const answers = await everyColumn('resolveBoolean', keys.boolean, context, { 'flagd-selector': token });
    for (const [column, answer] of Object.entries(answers)) {
      // connect-node stops inflating a gzip body at the limit and answers that INTERNAL.
      expect([column, answer]).toEqual([column, column.startsWith('grpc-gzip') ? { code: 'Internal', message: 'decompression failed' } : expect.objectContaining({ code: 'ResourceExhausted' })]);
    }
  });

  it('spends the same per-token budget: RESOURCE_EXHAUSTED past it on every path', async () => {
    const spent = (await boundToken(fx)).value;
    const v1 = evaluationV1(app, 'grpc');
    for (let i = 0; i < PER_TOKEN_LIMIT; i++) await v1.resolveBoolean({ flagKey: keys.boolean }, selector(spent));
    const answers = await everyColumn('resolveBoolean', keys.boolean, {}, { 'flagd-selector': spent });
    expect(new Set(same(answers)).size).toBe(1);
    expect(Object.values(answers)[0]).toMatchObject({ code: 'ResourceExhausted' });
  });

  it("records the lean path's evaluations with source flagd", async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    await evaluationV2(app, 'grpc').resolveFloat({ flagKey: keys.float, context: { targetingKey: 'recorded-lean' } }, selector(token));
    const res = await eventually(async () => {
      const r = await fx.viewer.request('GET', `/api/evaluations?serviceId=${fx.serviceId}&flagKey=${keys.float}&since=${encodeURIComponent(since)}`);
      return r.body.evaluations?.some((e: { source: string }) => e.source === 'flagd') ? r : undefined;
    });
    expect(res.body.evaluations.find((e: { source: string }) => e.source === 'flagd')).toMatchObject({ flagKey: keys.float, environment: 'development', value: 1.5 });
  });
});

describe('gRPC framing on the lean path', () => {
  /** One raw gRPC call: the response headers, the body bytes and the trailers. */
  async function rawCall(path: string, body: Buffer, headers: Record<string, string> = {}) {
    const session = http2.connect(app.urls.flagd!);
    try {
      const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', 'flagd-selector': token, ...headers });
      const chunks: Buffer[] = [];
      let responseHeaders: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      stream.on('response', (h) => (responseHeaders = h));
      stream.on('trailers', (t) => (trailers = t));
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.end(body);
      await new Promise<void>((resolve, reject) => {
        stream.on('close', resolve);
        stream.on('error', reject);
      });
      return { headers: responseHeaders, body: Buffer.concat(chunks), trailers };
    } finally {
      session.close();
    }
  }

  const framed = (message: Uint8Array, flags = 0) => {
    const out = Buffer.alloc(5 + message.length);
    out[0] = flags;
    out.writeUInt32BE(message.length, 1);
    out.set(message, 5);
    return out;
  };
  const request = (flagKey: string) => toBinary(ResolveBooleanRequestSchema, create(ResolveBooleanRequestSchema, { flagKey }));
  const PATH = '/flagd.evaluation.v1.Service/ResolveBoolean';

  it('answers headers, one length-prefixed message and grpc-status 0 trailers', async () => {
    const res = await rawCall(PATH, framed(request(keys.boolean)));
    expect(res.headers[':status']).toBe(200);
    expect(res.headers['content-type']).toBe('application/grpc+proto');
    expect(res.trailers['grpc-status']).toBe('0');
    expect(res.body.readUInt32BE(1)).toBe(res.body.length - 5);
    expect(fromBinary(ResolveBooleanResponseSchema, res.body.subarray(5))).toMatchObject({ value: true, reason: 'STATIC' });
  });

  it('answers an error trailers-only, with the percent-encoded message', async () => {
    const res = await rawCall(PATH, framed(request('no-such-flag')));
    expect(res.headers['grpc-status']).toBe(String(Code.NotFound));
    expect(decodeURIComponent(String(res.headers['grpc-message']))).toMatch(/^FLAG_NOT_FOUND: /);
    expect(res.body.length).toBe(0);
  });

  it('refuses bodies connect-node refuses, with its codes', async () => {
    const message = request(keys.boolean);
    const cases: [Buffer, Code][] = [
      [Buffer.alloc(0), Code.Unimplemented],
      [framed(message).subarray(0, 7), Code.InvalidArgument],
      [Buffer.concat([framed(message), framed(message)]), Code.Unimplemented],
      [framed(message, 1), Code.Internal],
      [framed(Buffer.from([0xff, 0xff, 0xff])), Code.InvalidArgument],
    ];
    for (const [body, code] of cases) {
      const res = await rawCall(PATH, body);
      expect({ body: body.length, status: Number(res.headers['grpc-status'] ?? res.trailers['grpc-status']) }).toEqual({ body: body.length, status: code });
    }
  });

  it('refuses a malformed grpc-timeout as connect-node does, and accepts a valid one', async () => {
    const message = framed(request(keys.boolean));
    const bad = await rawCall(PATH, message, { 'grpc-timeout': '5 seconds' });
    expect([bad.headers['grpc-status'], decodeURIComponent(String(bad.headers['grpc-message']))]).toEqual([String(Code.InvalidArgument), 'protocol error: invalid grpc timeout value: 5 seconds']);
    const good = await rawCall(PATH, message, { 'grpc-timeout': '5S' });
    expect(good.trailers['grpc-status']).toBe('0');
    const viaConnect = await rawCall(PATH, framed(Buffer.from(JSON.stringify({ flagKey: keys.boolean }))), { 'content-type': 'application/grpc+json', 'grpc-timeout': '5 seconds' });
    expect(viaConnect.trailers['grpc-message'] ?? viaConnect.headers['grpc-message']).toBe(bad.headers['grpc-message']);
  });

  it('refuses a message announced over 64 KB before reading it', async () => {
    const body = Buffer.alloc(5 + 1024 * 1024);
    body.writeUInt32BE(10 * 1024 * 1024, 1);
    const res = await rawCall(PATH, body);
    expect(res.headers['grpc-status']).toBe(String(Code.ResourceExhausted));
  });

  it('leaves what it does not serve to connect-node: gRPC+JSON, other methods', async () => {
    const json = await rawCall(PATH, framed(Buffer.from(JSON.stringify({ flagKey: keys.boolean }))), { 'content-type': 'application/grpc+json' });
    expect(json.trailers['grpc-status']).toBe('0');
    expect(JSON.parse(json.body.subarray(5).toString())).toMatchObject({ value: true });
    const all = await failure(evaluationV1(app, 'grpc').resolveAll({}, selector(token)));
    expect(all).toBeUndefined();
  });
});
