import net from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, personalToken, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { boundToken, evaluationV1, evaluationV2, failure, follow, selector, syncClient } from './support';

// Who may use flagd's protocols (docs/local-evaluation.md#credentials): a bound project API
// token with read, as selector or bearer; everything else is refused before any flag is read.
// Streams end only with an error: revocation, shutdown.

let app: TestApp;
let fx: DataPlaneFixture;
let other: DataPlaneFixture;
let flagKey: string;
let token: string;

beforeAll(async () => {
  app = await startTestApp();
  fx = await createFixture(app);
  other = await createFixture(app);
  token = (await boundToken(fx)).value;
  flagKey = (await createFlag(fx.owner, fx.serviceId, { type: 'boolean', enabled: true, defaultValue: true })).key;
  await untilEvaluated(app, { flagKey, serviceId: fx.serviceId }, (r) => r.value === true, { token: fx.readToken });
});
afterAll(() => app?.stop());

const codeOf = (error: unknown) => (error === undefined ? 'ok' : ConnectError.from(error).code);

/** Every flagd call with these call options: the codes they answer. */
async function everyCall(options: { headers?: Record<string, string> }, requestSelector = '') {
  const v1 = evaluationV1(app, 'grpc');
  const sync = syncClient(app);
  const abort = new AbortController();
  const stream = follow(sync.syncFlags({ selector: requestSelector }, { ...options, signal: abort.signal }));
  await eventually(async () => stream.messages.length > 0 || stream.ended !== undefined);
  abort.abort();
  await stream.done;
  return {
    resolveBoolean: codeOf(await failure(v1.resolveBoolean({ flagKey }, options))),
    resolveAll: codeOf(await failure(v1.resolveAll({}, options))),
    resolveV2: codeOf(await failure(evaluationV2(app, 'connect-http1').resolveBoolean({ flagKey }, options))),
    fetchAllFlags: codeOf(await failure(sync.fetchAllFlags({ selector: requestSelector }, options))),
    syncFlags: stream.messages.length > 0 ? 'ok' : codeOf(stream.ended),
  };
}

const all = (code: Code) => ({ resolveBoolean: code, resolveAll: code, resolveV2: code, fetchAllFlags: code, syncFlags: code });

describe('credentials', () => {
  it('refuses a call without a selector or bearer: UNAUTHENTICATED', async () => {
    expect(await everyCall({})).toEqual(all(Code.Unauthenticated));
  });

  it.each([
    ['an unknown token', () => 'fgr_0000000000000000000000000000000000000000000000000000000000000000'],
    ['garbage', () => 'not a token at all'],
    ['an unbound token of the project', () => fx.readToken],
    ["another project's token", () => other.readToken],
    ['a selector without flagSetId', () => 'source=somewhere'],
  ])('refuses %s: UNAUTHENTICATED', async (_what, value) => {
    expect(await everyCall(selector(value()))).toEqual(all(Code.Unauthenticated));
    expect(await everyCall({ headers: { authorization: `Bearer ${value()}` } })).toEqual(all(Code.Unauthenticated));
  });

  it('refuses a personal access token: UNAUTHENTICATED', async () => {
    const personal = await personalToken(app, fx.owner, 'read');
    expect(await everyCall(selector(personal))).toEqual(all(Code.Unauthenticated));
  });

  it('refuses a bound token without read: PERMISSION_DENIED', async () => {
    // The API binds only read tokens; the check behind it holds for a record that lost read.
    const { token: record, value } = await boundToken(fx);
    await app.platform.db.sql`UPDATE project_tokens SET scopes = '["write"]'::jsonb WHERE id = ${record.id}`;
    expect(await everyCall(selector(value))).toEqual(all(Code.PermissionDenied));
  });

  it('refuses a revoked token: UNAUTHENTICATED', async () => {
    const { token: record, value } = await boundToken(fx);
    expect((await evaluationV1(app, 'grpc').resolveBoolean({ flagKey }, selector(value))).value).toBe(true);
    expect((await fx.owner.request('DELETE', `/api/projects/${fx.projectId}/tokens/${record.id}`)).status).toBe(204);
    expect(await everyCall(selector(value))).toEqual(all(Code.Unauthenticated));
  });

  it('accepts the selector in the request field, the metadata (plain or flagSetId=) and the bearer', async () => {
    expect(await everyCall({}, token)).toMatchObject({ fetchAllFlags: 'ok' });
    expect(await everyCall(selector(`flagSetId=${token}`))).toMatchObject({ resolveBoolean: 'ok', resolveAll: 'ok', resolveV2: 'ok', fetchAllFlags: 'ok' });
    expect(await everyCall({ headers: { authorization: `Bearer ${token}` } })).toMatchObject({ resolveBoolean: 'ok', fetchAllFlags: 'ok' });
  });

  it("keeps a bound token of another project to its own flag set: our flags are not found there", async () => {
    const theirs = (await boundToken(other)).value;
    const error = await failure(evaluationV1(app, 'grpc').resolveBoolean({ flagKey }, selector(theirs)));
    expect(codeOf(error)).toBe(Code.NotFound);
    const document = JSON.parse((await syncClient(app).fetchAllFlags({ selector: theirs })).flagConfiguration);
    expect(document.flags[flagKey]).toBeUndefined();
  });

  it('refuses an oversized request: RESOURCE_EXHAUSTED, nothing evaluated', async () => {
    const context = { targetingKey: 'big', blob: 'x'.repeat(100 * 1024) };
    for (const protocol of ['grpc', 'connect-http1'] as const) {
      const error = await failure(evaluationV1(app, protocol).resolveBoolean({ flagKey, context }, selector(token)));
      expect(codeOf(error)).toBe(Code.ResourceExhausted);
    }
  });
});

describe('revocation ends open streams', () => {
  it('ends a SyncFlags and an EventStream UNAUTHENTICATED within 15 s, never OK', async () => {
    const { token: record, value } = await boundToken(fx);
    const aborts = [new AbortController(), new AbortController()];
    const sync = follow(syncClient(app).syncFlags({}, { ...selector(value), signal: aborts[0].signal }));
    const events = follow(evaluationV1(app, 'grpc').eventStream({}, { ...selector(value), signal: aborts[1].signal }));
    try {
      await eventually(async () => sync.messages.length > 0 && events.messages.length > 0);
      expect((await fx.owner.request('DELETE', `/api/projects/${fx.projectId}/tokens/${record.id}`)).status).toBe(204);
      const revokedAt = Date.now();
      await eventually(async () => sync.ended !== undefined && events.ended !== undefined, 15_000);
      expect(Date.now() - revokedAt).toBeLessThan(15_000);
      expect(codeOf(sync.ended === 'ok' ? undefined : sync.ended)).toBe(Code.Unauthenticated);
      expect(codeOf(events.ended === 'ok' ? undefined : events.ended)).toBe(Code.Unauthenticated);
    } finally {
      for (const a of aborts) a.abort();
      await Promise.all([sync.done, events.done]);
    }
  });
});

describe('limits and shutdown', () => {
  let limited: TestApp;
  let stopped = false;
  let lfx: DataPlaneFixture;
  let ltoken: string;
  beforeAll(async () => {
    limited = await startTestApp({ RATE_LIMIT_PER_TOKEN: '20', STREAM_MAX_PER_IP: '2', HTTP_HEADERS_TIMEOUT_MS: '1000' });
    lfx = await createFixture(limited);
    ltoken = (await boundToken(lfx)).value;
  });
  afterAll(async () => {
    if (!stopped) await limited?.stop();
  });

  it('spends the per-token budget: RESOURCE_EXHAUSTED past it', async () => {
    const v1 = evaluationV1(limited, 'grpc');
    const codes: unknown[] = [];
    for (let i = 0; i < 25; i++) codes.push(codeOf(await failure(v1.resolveAll({}, selector(ltoken)))));
    expect(codes.slice(0, 20).every((c) => c === 'ok')).toBe(true);
    expect(codes.slice(20)).toEqual(new Array(5).fill(Code.ResourceExhausted));
  });

  it('closes a connection that never says which protocol it speaks', async () => {
    const { port } = new URL(limited.urls.flagd!);
    const openedAt = Date.now();
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise((resolve) => socket.once('close', resolve));
    // HTTP_HEADERS_TIMEOUT_MS is 1 s here; the bound is generous.
    expect(Date.now() - openedAt).toBeLessThan(15_000);
  });

  it('closes an HTTP/1.1 connection whose headers never finish', async () => {
    const { port } = new URL(limited.urls.flagd!);
    const openedAt = Date.now();
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write('POST /flagd.evaluation.v1.Service/ResolveAll HTTP/1.1\r\nHost: x\r\n'));
    socket.on('error', () => undefined);
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk));
    await new Promise((resolve) => socket.once('close', resolve));
    expect(answer).toMatch(/^HTTP\/1.1 408/);
    expect(Date.now() - openedAt).toBeLessThan(15_000);
  });

  it('caps open streams per IP and ends open streams UNAVAILABLE at shutdown', async () => {
    const token2 = (await boundToken(lfx)).value;
    const aborts = [new AbortController(), new AbortController(), new AbortController()];
    const streams = aborts.map((a) => follow(syncClient(limited).syncFlags({ selector: token2 }, { signal: a.signal })));
    try {
      await eventually(async () => streams.filter((s) => s.messages.length > 0).length === 2 && streams.some((s) => s.ended !== undefined));
      const refused = streams.find((s) => s.ended !== undefined)!;
      expect(codeOf(refused.ended)).toBe(Code.ResourceExhausted);
      const open = streams.filter((s) => s !== refused);
      stopped = true;
      await limited.stop();
      await eventually(async () => open.every((s) => s.ended !== undefined));
      for (const s of open) expect(codeOf(s.ended === 'ok' ? undefined : s.ended)).toBe(Code.Unavailable);
    } finally {
      for (const a of aborts) a.abort();
      await Promise.all(streams.map((s) => s.done));
    }
  });
});
