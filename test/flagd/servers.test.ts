import { Code, ConnectError } from '@connectrpc/connect';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';
import { PROTOCOLS, boundToken, pingOnce, evaluationV1, evaluationV2, failure, follow, selector, syncClient } from './support';

// flagd's protocols on FLAGD_PORT and FLAGD_SYNC_PORT (docs/local-evaluation.md), spoken by
// connect-node's gRPC and Connect clients (HTTP/1.1 and h2c) against the real platform.

let app: TestApp;
let fx: DataPlaneFixture;
let token: string;
let stringKey: string;
let offKey: string;
let objectKey: string;

const toggle = (key: string, enabled: boolean) => fx.owner.request('POST', `/api/flags/${key}/toggle?serviceId=${fx.serviceId}&environment=development`, { enabled });
const patch = (key: string, body: Record<string, unknown>) => fx.owner.request('PATCH', `/api/flags/${key}?serviceId=${fx.serviceId}&environment=development`, body);

beforeAll(async () => {
  app = await startTestApp({ STREAM_HEARTBEAT_MS: '300', ADMIN_EMAILS: 'flagd-ops@example.com' });
  fx = await createFixture(app);
  token = (await boundToken(fx)).value;
  stringKey = (await createFlag(fx.owner, fx.serviceId, { type: 'string', enabled: true, defaultValue: 'blue' })).key;
  offKey = (await createFlag(fx.owner, fx.serviceId, { type: 'boolean', enabled: false, defaultValue: false })).key;
  objectKey = (await createFlag(fx.owner, fx.serviceId, { type: 'object', enabled: true, defaultValue: { limit: 3 } })).key;
  await untilEvaluated(app, { flagKey: objectKey, serviceId: fx.serviceId }, (r) => r.reason === 'DEFAULT', { token: fx.readToken });
});
afterAll(() => app?.stop());

describe('flagd.evaluation on FLAGD_PORT', () => {
  it.each(PROTOCOLS)('resolves over %s with the selector metadata (v1 and v2)', async (protocol) => {
    const v1 = evaluationV1(app, protocol);
    const one = await v1.resolveString({ flagKey: stringKey, context: { targetingKey: 'u1' } }, selector(token));
    expect(one).toMatchObject({ value: 'blue', reason: 'STATIC', variant: 'default' });
    const off = await v1.resolveBoolean({ flagKey: offKey }, selector(`flagSetId=${token}`));
    expect(off).toMatchObject({ value: false, reason: 'DISABLED', variant: 'disabled' });
    const object = await v1.resolveObject({ flagKey: objectKey }, { headers: { authorization: `Bearer ${token}` } });
    expect(object.value).toEqual({ limit: 3 });

    const v2 = evaluationV2(app, protocol);
    const two = await v2.resolveString({ flagKey: stringKey }, selector(token));
    expect(two).toMatchObject({ value: 'blue', reason: 'STATIC', variant: 'default' });
  });

  it('names the variant of a rule, a weighted variant and the default as the sync document does', async () => {
    const ruled = await createFlag(fx.owner, fx.serviceId, {
      type: 'string',
      enabled: true,
      defaultValue: 'plain',
      targeting: [{ id: 'staff', conditions: [{ property: 'email', operator: 'ends_with', value: '@staff.example.com' }], value: 'staff-value' }],
      variants: [
        { name: 'red', value: 'R', weight: 50 },
        { name: 'green', value: 'G', weight: 50 },
      ],
    });
    await untilEvaluated(app, { flagKey: ruled.key, serviceId: fx.serviceId, context: { targetingKey: 'warm' } }, (r) => r.reason === 'VARIANT', { token: fx.readToken });
    const v1 = evaluationV1(app, 'grpc');
    const rule = await v1.resolveString({ flagKey: ruled.key, context: { targetingKey: 'u1', email: 'ann@staff.example.com' } }, selector(token));
    expect(rule).toMatchObject({ value: 'staff-value', reason: 'TARGETING_MATCH', variant: 'rule:staff' });
    const split = await v1.resolveString({ flagKey: ruled.key, context: { targetingKey: 'u1' } }, selector(token));
    expect(split.reason).toBe('SPLIT');
    expect(['red', 'green']).toContain(split.variant);
    expect(split.value).toBe(split.variant === 'red' ? 'R' : 'G');
    const noKey = await failure(v1.resolveString({ flagKey: ruled.key, context: {} }, selector(token)));
    expect(ConnectError.from(noKey).code).toBe(Code.InvalidArgument);
    expect(ConnectError.from(noKey).rawMessage).toMatch(/TARGETING_KEY_MISSING/);
  });

  it('answers ResolveAll with every flag of the set, typed', async () => {
    const all = await evaluationV1(app, 'grpc').resolveAll({ context: {} }, selector(token));
    expect(all.flags[stringKey]).toMatchObject({ reason: 'STATIC', variant: 'default', value: { case: 'stringValue', value: 'blue' } });
    expect(all.flags[offKey]).toMatchObject({ reason: 'DISABLED', variant: 'disabled', value: { case: 'boolValue', value: false } });
    expect(all.flags[objectKey]).toMatchObject({ value: { case: 'objectValue', value: { limit: 3 } } });
  });

  it('answers evaluation errors with the status codes flagd uses', async () => {
    const v1 = evaluationV1(app, 'grpc');
    const missing = await failure(v1.resolveBoolean({ flagKey: 'no-such-flag' }, selector(token)));
    expect(ConnectError.from(missing).code).toBe(Code.NotFound);
    expect(ConnectError.from(missing).rawMessage).toMatch(/FLAG_NOT_FOUND/);
    const mismatch = await failure(v1.resolveBoolean({ flagKey: stringKey }, selector(token)));
    expect(ConnectError.from(mismatch).code).toBe(Code.InvalidArgument);
    expect(ConnectError.from(mismatch).rawMessage).toMatch(/TYPE_MISMATCH/);
    const noKey = await failure(v1.resolveBoolean({ flagKey: '' }, selector(token)));
    expect(ConnectError.from(noKey).code).toBe(Code.InvalidArgument);
  });

  it("records the evaluations like other protocols' (source flagd)", async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    await evaluationV1(app, 'connect-http1').resolveString({ flagKey: stringKey, context: { targetingKey: 'recorded' } }, selector(token));
    const res = await eventually(async () => {
      const r = await fx.viewer.request('GET', `/api/evaluations?serviceId=${fx.serviceId}&flagKey=${stringKey}&since=${encodeURIComponent(since)}`);
      return r.body.evaluations?.some((e: { source: string }) => e.source === 'flagd') ? r : undefined;
    });
    expect(res.body.evaluations.find((e: { source: string }) => e.source === 'flagd')).toMatchObject({ flagKey: stringKey, environment: 'development', value: 'blue' });
  });

  it.each(PROTOCOLS)('streams provider_ready, configuration_change naming the flag, and keep_alive over %s', async (protocol) => {
    const abort = new AbortController();
    const stream = follow(evaluationV1(app, protocol).eventStream({}, { ...selector(token), signal: abort.signal }));
    try {
      await eventually(async () => stream.messages.length > 0);
      expect(stream.messages[0].type).toBe('provider_ready');
      expect((await patch(stringKey, { defaultValue: `changed-${protocol}` })).status).toBe(200);
      const change = await eventually(async () => stream.messages.find((m) => m.type === 'configuration_change'));
      expect(Object.keys(change.data?.flags as object)).toEqual([stringKey]);
      await eventually(async () => stream.messages.some((m) => m.type === 'keep_alive'));
    } finally {
      abort.abort();
      await stream.done;
    }
  });

  it("binds a credential-less EventStream to the flag set its connection's calls name (the JS provider's RPC mode)", async () => {
    const v1 = evaluationV1(app, 'grpc');
    const abort = new AbortController();
    const stream = follow(v1.eventStream({}, { signal: abort.signal }));
    try {
      await eventually(async () => stream.messages.some((m) => m.type === 'provider_ready'));
      await v1.resolveString({ flagKey: stringKey }, selector(token));
      expect((await toggle(offKey, true)).status).toBe(200);
      const change = await eventually(async () => stream.messages.find((m) => m.type === 'configuration_change'));
      expect(Object.keys(change.data?.flags as object)).toEqual([offKey]);
    } finally {
      abort.abort();
      await stream.done;
      await toggle(offKey, false);
    }
  });
});

describe('both ports', () => {
  it.each(['flagd', 'flagdSync'] as const)('answer HTTP/2 keepalive pings in cleartext (%s)', async (port) => {
    expect(await pingOnce(app.urls[port]!)).toBeGreaterThanOrEqual(0);
  });

  it('answer an unknown path 404 over HTTP/1.1', async () => {
    expect((await fetch(`${app.urls.flagd}/nothing/here`)).status).toBe(404);
  });
});

describe('flagd.sync on FLAGD_SYNC_PORT', () => {
  it('answers FetchAllFlags with the flagd document of the set (selector in the request or the metadata)', async () => {
    const sync = syncClient(app);
    for (const answer of [await sync.fetchAllFlags({ selector: token }), await sync.fetchAllFlags({}, selector(`flagSetId=${token}`))]) {
      const document = JSON.parse(answer.flagConfiguration);
      expect(document.$schema).toBe('https://flagd.dev/schema/v0/flags.json');
      expect(document.flags[objectKey]).toMatchObject({ state: 'ENABLED', defaultVariant: 'default', variants: { default: { limit: 3 } } });
      expect(document.flags[objectKey].metadata).toMatchObject({ flagKey: objectKey, type: 'object' });
    }
  });

  it('answers GetMetadata', async () => {
    expect((await syncClient(app).getMetadata({})).metadata).toEqual({});
  });

  it('streams the document at connect and after every change, over gRPC', async () => {
    const abort = new AbortController();
    const stream = follow(syncClient(app).syncFlags({ selector: token }, { signal: abort.signal }));
    try {
      await eventually(async () => stream.messages.length > 0);
      expect(JSON.parse(stream.messages[0].flagConfiguration).flags[objectKey]).toBeDefined();
      expect((await patch(objectKey, { defaultValue: { limit: 4 } })).status).toBe(200);
      const updated = await eventually(async () => stream.messages.map((m) => JSON.parse(m.flagConfiguration)).find((d) => d.flags[objectKey].variants.default.limit === 4));
      expect(updated.flags[stringKey]).toBeDefined();
      expect(stream.ended).toBeUndefined();
    } finally {
      abort.abort();
      await stream.done;
    }
  });

  it('sends the document again after a change of a cohort a flag of the set names', async () => {
    const cohort = await fx.owner.request('POST', `/api/projects/${fx.projectId}/cohorts`, {
      name: `Staff ${stringKey}`,
      rules: [{ id: 'staff', conditions: [{ property: 'email', operator: 'ends_with', value: '@staff.example.com' }] }],
    });
    expect(cohort.status).toBe(201);
    const flag = await createFlag(fx.owner, fx.serviceId, {
      type: 'boolean',
      enabled: true,
      defaultValue: false,
      targeting: [{ id: 'staff', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: cohort.body.id }], value: true }],
    });
    const abort = new AbortController();
    const stream = follow(syncClient(app).syncFlags({ selector: token }, { signal: abort.signal }));
    try {
      await eventually(async () => stream.messages.some((m) => JSON.parse(m.flagConfiguration).flags[flag.key] !== undefined));
      const before = stream.messages.length;
      const changed = await fx.owner.request('PATCH', `/api/projects/${fx.projectId}/cohorts/${cohort.body.id}`, {
        rules: [{ id: 'staff', conditions: [{ property: 'email', operator: 'ends_with', value: '@example.com' }] }],
      });
      expect(changed.status).toBe(200);
      await eventually(async () => stream.messages.length > before);
      expect(JSON.parse(stream.messages[stream.messages.length - 1].flagConfiguration).flags[flag.key]).toBeDefined();
    } finally {
      abort.abort();
      await stream.done;
    }
  });

  it('counts open streams in /api/health/evaluation', async () => {
    const ops = await app.signup({ email: 'flagd-ops@example.com', verified: true });
    const abort = new AbortController();
    const stream = follow(syncClient(app).syncFlags({ selector: token }, { signal: abort.signal }));
    try {
      await eventually(async () => stream.messages.length > 0);
      const res = await ops.request('GET', '/api/health/evaluation', undefined, { listener: 'data' });
      expect(res.status).toBe(200);
      expect(res.body.checks.flagdStreams).toMatchObject({ working: true, open: expect.any(Number) });
      expect(res.body.checks.flagdStreams.open).toBeGreaterThanOrEqual(1);
    } finally {
      abort.abort();
      await stream.done;
    }
  });

  it('shares one document per change between the streams of a flag set', async () => {
    const aborts = [new AbortController(), new AbortController()];
    const streams = aborts.map((a) => follow(syncClient(app).syncFlags({ selector: token }, { signal: a.signal })));
    try {
      await eventually(async () => streams.every((s) => s.messages.length > 0));
      expect((await toggle(offKey, true)).status).toBe(200);
      await eventually(async () => streams.every((s) => s.messages.length > 1));
      const [a, b] = streams.map((s) => s.messages[s.messages.length - 1].flagConfiguration);
      expect(a).toBe(b);
      expect(JSON.parse(a).flags[offKey].defaultVariant).toBe('default');
    } finally {
      for (const a of aborts) a.abort();
      await Promise.all(streams.map((s) => s.done));
      await toggle(offKey, false);
    }
  });
});
