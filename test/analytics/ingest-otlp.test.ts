import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { fromBinary } from '@bufbuild/protobuf';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import { JsonLogsSerializer, JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { projectPath } from '../../api/infra/paths';
import { hashTargetingKey } from '../../api/features/evaluation/recorder';
import { CanaryWarehouse } from '../../api/features/canary/warehouse';
import { bucket, ROLLOUT_SALT, rolloutThreshold } from '../../api/features/evaluation/engine/index';
import { BanditWarehouse } from '../../api/features/experiments/warehouse';
import { StatusSchema } from '../../api/gen/google/rpc/status_pb';
import { ExportTraceServiceResponseSchema } from '../../api/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import { PERSONAL_TOKEN_REFUSAL } from '../../api/http/errors';
import { untilEvaluated } from '../data-plane/support';
import { boundToken } from '../flagd/support';
import { startTestApp, type TestApp } from '../support/harness';
import { createProject, opaqueToken, personalToken, type Project } from '../webhooks/support';

/**
 * OpenTelemetry ingestion (docs/opentelemetry.md): OTLP/HTTP traces and logs from the
 * OpenTelemetry JS SDK's own serializers and exporters, what they become in ClickHouse and in a
 * reader of outcomes, partial success, and every refusal.
 */

let app: TestApp;
let p: Project;
let other: Project;
let readToken: string;

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
  readToken = await opaqueToken(p.owner, p.projectId, { read: true });
});
afterAll(() => app?.stop());

async function rows<T = Record<string, unknown>>(query: string, params: Record<string, unknown>): Promise<T[]> {
  await app.platform.analyticsWriter.flush();
  const rs = await app.platform.analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
  return rs.json<T>();
}

interface PostOptions {
  token?: string;
  type?: string;
  headers?: Record<string, string>;
  gzip?: boolean;
}

/** Posts an OTLP body to the ingest listener as an exporter does. */
async function post(path: '/v1/traces' | '/v1/logs', body: Uint8Array | string, opts: PostOptions = {}) {
  const headers: Record<string, string> = { 'content-type': opts.type ?? 'application/x-protobuf', 'x-service-id': p.serviceId, 'x-environment': 'production', ...opts.headers };
  const token = 'token' in opts ? opts.token : readToken;
  if (token) headers.authorization = `Bearer ${token}`;
  let payload = Buffer.from(body);
  if (opts.gzip) {
    payload = gzipSync(payload);
    headers['content-encoding'] = 'gzip';
  }
  const res = await fetch(`${app.urls.ingest}${path}`, { method: 'POST', headers, body: payload });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

const json = (bytes: Buffer) => JSON.parse(bytes.toString('utf8'));

/**
 * Runs test/analytics/otlp-app.ts in its own process (the exporters load their transport with a
 * dynamic import jest does not run).
 */
const runApp = (env: Record<string, string>) =>
  promisify(execFile)(process.execPath, ['-r', projectPath('node_modules/tsx/dist/cjs/index.cjs'), projectPath('test/analytics/otlp-app.ts')], {
    env: { ...process.env, ...env },
    timeout: 60_000,
  });

/** A tracer of the OpenTelemetry SDK whose ended spans stay in memory. */
function sdkTracer() {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
  return { tracer: provider.getTracer('checkout-app'), memory };
}

const evaluation = (flagKey: string, contextId: string, value: unknown, variant?: string): Attributes => ({
  'feature_flag.key': flagKey,
  'feature_flag.provider.name': 'flagd',
  'feature_flag.result.reason': 'targeting_match',
  'feature_flag.context.id': contextId,
  ...(variant === undefined ? {} : { 'feature_flag.result.variant': variant }),
  ...(value === undefined ? {} : { 'feature_flag.result.value': value as string }),
});

/**
 * One request trace per user: a server span whose child evaluated `flagKey`, failing for the
 * users in `failing`. Answers the evaluating children and the roots apart, in the order the SDK ended them.
 */
function userTraces(users: string[], failing: Set<string>, flagKey: string, value: boolean, variant: string) {
  const { tracer, memory } = sdkTracer();
  for (const user of users) {
    const root = tracer.startSpan('POST /checkout', { kind: SpanKind.SERVER });
    const child = tracer.startSpan('evaluate flags', {}, trace.setSpan(ROOT_CONTEXT, root));
    child.addEvent('feature_flag.evaluation', evaluation(flagKey, user, value, variant));
    child.end();
    if (failing.has(user)) root.setStatus({ code: SpanStatusCode.ERROR, message: 'boom' });
    root.end();
  }
  const spans = memory.getFinishedSpans();
  const isRoot = (s: ReadableSpan) => !s.parentSpanContext;
  return { children: spans.filter((s) => !isRoot(s)), roots: spans.filter(isRoot) };
}

describe('POST /v1/traces', () => {
  it('counts evaluation span events as exposures and local roots as error and latency outcomes, joined across requests (protobuf)', async () => {
    const flagKey = 'otlp-proto-flag';
    const users = Array.from({ length: 10 }, (_, i) => `proto-user-${i}`);
    const failing = new Set(users.slice(0, 3));
    const { children, roots } = userTraces(users, failing, flagKey, true, 'on');

    // The evaluating spans first, their roots in a later export: the root still counts for them.
    for (const spans of [children, roots]) {
      const res = await post('/v1/traces', ProtobufTraceSerializer.serializeRequest(spans)!);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/x-protobuf/);
      expect(fromBinary(ExportTraceServiceResponseSchema, res.bytes).partialSuccess).toBeUndefined();
    }

    const exposures = await rows<{ targeting_key_hash: string; variant: string; value: string; reason: string; source: string; evaluations: number }>(
      `SELECT targeting_key_hash, variant, value, reason, source, evaluations FROM evaluation_events WHERE service_id = {s:String} AND flag_key = {f:String} ORDER BY targeting_key_hash`,
      { s: p.serviceId, f: flagKey },
    );
    expect(exposures).toHaveLength(10);
    expect(exposures.map((e) => e.targeting_key_hash).sort()).toEqual(users.map(hashTargetingKey).sort());
    for (const e of exposures) expect(e).toMatchObject({ variant: 'on', value: 'true', reason: 'TARGETING_MATCH', source: 'otlp', evaluations: 1 });

    const outcomes = await rows<{ event: string; n: string; keys: string[]; flag_maps: Record<string, string>[]; minValue: number | null }>(
      `SELECT event, count() AS n, groupArray(targeting_key_hash) AS keys, groupArray(flags) AS flag_maps, min(value) AS minValue
       FROM outcome_events WHERE service_id = {s:String} AND origin = 'otlp' AND mapContains(flags, {f:String}) GROUP BY event ORDER BY event`,
      { s: p.serviceId, f: flagKey },
    );
    expect(outcomes.map((o) => [o.event, Number(o.n)])).toEqual([
      ['error', 3],
      ['latency', 10],
    ]);
    expect(outcomes[0].keys.sort()).toEqual([...failing].map(hashTargetingKey).sort());
    expect(outcomes[0].flag_maps.every((f) => f[flagKey] === 'true')).toBe(true);
    expect(outcomes[1].minValue).toBeGreaterThanOrEqual(0);

    // A reader of outcomes counts them: the experiments guardrail's errors per arm.
    const arms = await new BanditWarehouse(app.platform.analytics).errors({
      projectId: p.projectId,
      serviceId: p.serviceId,
      environment: 'production',
      flagKey,
      fromMs: Date.now() - 3600_000,
      toMs: Date.now() + 60_000,
    });
    expect(arms).toEqual([{ name: 'on', requests: 10, errors: 3 }]);

    // The same roots exported again (an exporter's retry) count nothing twice.
    expect((await post('/v1/traces', ProtobufTraceSerializer.serializeRequest(roots)!)).status).toBe(200);
    const [again] = await rows<{ n: string }>(`SELECT count() AS n FROM outcome_events WHERE service_id = {s:String} AND mapContains(flags, {f:String})`, { s: p.serviceId, f: flagKey });
    expect(Number(again.n)).toBe(13);
  });

  it('takes what a real application sends: the Node SDK, OpenFeature span event hook and OTLP exporters (JSON with gzip, and protobuf)', async () => {
    for (const protocol of ['json', 'proto']) {
      const flagKey = `otlp-app-${protocol}`;
      const users = ['app-a', 'app-b', 'app-c'];
      const { stdout } = await runApp({
        OTLP_URL: app.urls.ingest,
        OTLP_TOKEN: readToken,
        SERVICE_ID: p.serviceId,
        ENVIRONMENT: 'staging',
        OTLP_PROTOCOL: protocol,
        FLAG_KEY: flagKey,
        USERS: users.join(','),
        FAILING: 'app-b',
      });
      expect(JSON.parse(stdout).results).toEqual([ExportResultCode.SUCCESS]);
      const exposures = await rows<{ key: string; variant: string; value: string; reason: string }>(
        `SELECT targeting_key_hash AS key, variant, value, reason FROM evaluation_events WHERE service_id = {s:String} AND environment = 'staging' AND flag_key = {f:String} AND source = 'otlp' ORDER BY key`,
        { s: p.serviceId, f: flagKey },
      );
      expect(exposures).toEqual(users.map((u) => ({ key: hashTargetingKey(u), variant: 'on', value: 'true', reason: 'STATIC' })).sort((x, y) => x.key.localeCompare(y.key)));
      const outcomes = await rows<{ event: string; key: string; flag_values: Record<string, string> }>(
        `SELECT event, targeting_key_hash AS key, flags AS flag_values FROM outcome_events WHERE service_id = {s:String} AND environment = 'staging' AND mapContains(flags, {f:String}) ORDER BY event, key`,
        { s: p.serviceId, f: flagKey },
      );
      const expected = [
        { event: 'error', key: hashTargetingKey('app-b') },
        ...users.map((u) => ({ event: 'latency', key: hashTargetingKey(u) })),
      ].sort((x, y) => x.event.localeCompare(y.event) || x.key.localeCompare(y.key));
      expect(outcomes).toEqual(expected.map((o) => ({ ...o, flag_values: { [flagKey]: 'true' } })));
    }
  });

  it('places exposures on a partial rollout by the context id, so a canary gate counts OpenTelemetry alone', async () => {
    const flagKey = 'otlp-canary';
    const created = await p.owner.request('POST', '/api/flags', {
      key: flagKey,
      name: flagKey,
      type: 'boolean',
      serviceId: p.serviceId,
      environment: 'production',
      enabled: true,
      defaultValue: false,
      targeting: [{ id: 'canary', conditions: [], value: true, rolloutPercentage: 50 }],
    });
    expect(created.status).toBe(201);
    // The snapshot has the flag once an evaluation answers the rule's value (the probe counts as an exposure too).
    const probe = 'otlp-canary-probe';
    await untilEvaluated(app, { flagKey, serviceId: p.serviceId, environment: 'production', context: { targetingKey: probe } }, (r) => typeof r.value === 'boolean', { token: readToken });
    const inside = (user: string) => bucket(flagKey, user, ROLLOUT_SALT) < rolloutThreshold(50);

    const users = Array.from({ length: 40 }, (_, i) => `canary-user-${i}`);
    const treated = users.filter(inside);
    const failing = new Set(treated.filter((_, i) => i % 2 === 0));
    const { tracer, memory } = sdkTracer();
    for (const user of users) {
      const root = tracer.startSpan('POST /checkout', { kind: SpanKind.SERVER });
      root.addEvent('feature_flag.evaluation', evaluation(flagKey, user, inside(user), inside(user) ? 'canary' : 'default'));
      if (failing.has(user)) root.setStatus({ code: SpanStatusCode.ERROR });
      root.end();
    }
    // An application whose context decided otherwise than the context id alone would: on no side.
    const odd = tracer.startSpan('POST /checkout', { kind: SpanKind.SERVER });
    odd.addEvent('feature_flag.evaluation', evaluation(flagKey, treated[0], false, 'default'));
    odd.end();
    expect((await post('/v1/traces', ProtobufTraceSerializer.serializeRequest(memory.getFinishedSpans())!)).status).toBe(200);
    await app.platform.analyticsWriter.flush();

    const cohorts = await new CanaryWarehouse(app.platform.analytics).cohorts(
      { projectId: p.projectId, serviceId: p.serviceId, environment: 'production', flagKey, ruleId: 'canary', treatmentValue: 'true', conditionsAlwaysHold: true },
      Date.now() - 3600_000,
      Date.now() + 60_000,
    );
    const probeIn = inside(probe) ? 1 : 0;
    // The odd trace's latency still counts for treatment: the reader attributes it by its context's side.
    expect(cohorts.treatment).toMatchObject({ exposures: treated.length + probeIn, errors: failing.size, latencyCount: treated.length + 1 });
    expect(cohorts.control).toMatchObject({ exposures: users.length - treated.length + 1 - probeIn, errors: 0, latencyCount: users.length - treated.length });
    const [unplaced] = await rows<{ n: string }>(`SELECT count() AS n FROM evaluation_events WHERE flag_key = {f:String} AND source = 'otlp' AND rollout_side = ''`, { f: flagKey });
    expect(Number(unplaced.n)).toBe(1);
  });

  it('answers partial success for the spans it rejects and keeps the rest (JSON in, JSON out)', async () => {
    const flagKey = 'otlp-partial';
    const now = BigInt(Date.now()) * 1_000_000n;
    const hoursAgo = now - 3n * 3600n * 1_000_000_000n;
    const span = (id: string, events: unknown[]) => ({
      traceId: '5b8efff798038103d269b633813fc60c',
      spanId: id,
      parentSpanId: 'eee19b7ec3c1b174',
      flags: 0x100,
      name: 'work',
      kind: 1,
      startTimeUnixNano: String(now - 5_000_000n),
      endTimeUnixNano: String(now),
      events,
    });
    const attrs = (list: Record<string, string>) => Object.entries(list).map(([key, v]) => ({ key, value: { stringValue: v } }));
    const body = {
      resourceSpans: [
        {
          resource: { attributes: attrs({ 'service.name': 'checkout' }) },
          scopeSpans: [
            {
              scope: { name: 'manual' },
              spans: [
                span('eee19b7ec3c1b173', [{ timeUnixNano: String(now), name: 'feature_flag', attributes: attrs({ 'feature_flag.key': flagKey, 'feature_flag.variant': 'blue', 'feature_flag.context.id': 'json-user' }) }]),
                span('eee19b7ec3c1b175', [{ timeUnixNano: String(now), name: 'feature_flag.evaluation', attributes: attrs({ 'feature_flag.result.value': 'x', 'feature_flag.context.id': 'json-user' }) }]),
                span('eee19b7ec3c1b176', [{ timeUnixNano: String(hoursAgo), name: 'feature_flag.evaluation', attributes: attrs({ 'feature_flag.key': flagKey, 'feature_flag.result.value': 'x', 'feature_flag.context.id': 'old-user' }) }]),
                // An evaluation nobody saw (no context id) is not an exposure, and not an error either.
                span('eee19b7ec3c1b177', [{ timeUnixNano: String(now), name: 'feature_flag.evaluation', attributes: attrs({ 'feature_flag.key': flagKey, 'feature_flag.result.value': 'x' }) }]),
              ],
            },
          ],
        },
      ],
    };
    const res = await post('/v1/traces', JSON.stringify(body), { type: 'application/json' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(json(res.bytes)).toEqual({
      partialSuccess: { rejectedSpans: '2', errorMessage: 'a flag evaluation event without feature_flag.key (and 1 more rejected)' },
    });
    // The legacy event name and the deprecated variant attribute count.
    const stored = await rows<{ key: string; variant: string; value: string }>(
      `SELECT targeting_key_hash AS key, variant, value FROM evaluation_events WHERE service_id = {s:String} AND flag_key = {f:String}`,
      { s: p.serviceId, f: flagKey },
    );
    expect(stored).toEqual([{ key: hashTargetingKey('json-user'), variant: 'blue', value: 'null' }]);
  });

  it('joins evaluation log records to their trace: the root exported afterwards counts for them (logs JSON, traces protobuf)', async () => {
    const flagKey = 'otlp-logs-flag';
    const { tracer, memory } = sdkTracer();
    const logMemory = new InMemoryLogRecordExporter();
    const logger = new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter: logMemory })] }).getLogger('@openfeature/open-telemetry-hooks');
    const root = tracer.startSpan('GET /cart', { kind: SpanKind.SERVER });
    logger.emit({ eventName: 'feature_flag.evaluation', attributes: evaluation(flagKey, 'log-user', 'green', 'green'), context: trace.setSpan(ROOT_CONTEXT, root) });
    root.setStatus({ code: SpanStatusCode.ERROR });
    root.end();

    const logs = await post('/v1/logs', JsonLogsSerializer.serializeRequest(logMemory.getFinishedLogRecords())!, { type: 'application/json' });
    expect(logs.status).toBe(200);
    expect(json(logs.bytes)).toEqual({});
    expect((await post('/v1/traces', JsonTraceSerializer.serializeRequest(memory.getFinishedSpans())!, { type: 'application/json', gzip: true })).status).toBe(200);

    const exposures = await rows<{ key: string; value: string }>(`SELECT targeting_key_hash AS key, value FROM evaluation_events WHERE service_id = {s:String} AND flag_key = {f:String}`, { s: p.serviceId, f: flagKey });
    expect(exposures).toEqual([{ key: hashTargetingKey('log-user'), value: '"green"' }]);
    const outcomes = await rows<{ event: string; flag_values: Record<string, string> }>(
      `SELECT event, flags AS flag_values FROM outcome_events WHERE service_id = {s:String} AND mapContains(flags, {f:String}) ORDER BY event`,
      { s: p.serviceId, f: flagKey },
    );
    expect(outcomes).toEqual([
      { event: 'error', flag_values: { [flagKey]: '"green"' } },
      { event: 'latency', flag_values: { [flagKey]: '"green"' } },
    ]);
  });
});

describe('OTLP refusals', () => {
  const someSpans = () => ProtobufTraceSerializer.serializeRequest(userTraces(['refused-user'], new Set(), 'otlp-refused', true, 'on').children)!;

  it('refuses callers as every SDK route does, and stores nothing', async () => {
    const pat = await personalToken(p.owner, 'admin');
    const writeOnly = await opaqueToken(p.owner, p.projectId, { read: false, write: true });
    const otherRead = await opaqueToken(other.owner, other.projectId, { read: true });
    const bound = (await boundToken({ owner: p.owner, projectId: p.projectId, serviceId: p.serviceId } as never, { environment: 'production' })).value;
    const body = someSpans();
    expect((await post('/v1/traces', body, { token: undefined })).status).toBe(401);
    const personal = await post('/v1/traces', body, { token: pat });
    expect(personal.status).toBe(403);
    expect(json(personal.bytes).message).toBe(PERSONAL_TOKEN_REFUSAL);
    expect((await post('/v1/traces', body, { token: writeOnly })).status).toBe(403);
    // Another project's token naming this project's service: the service is not revealed.
    const cross = await post('/v1/logs', body, { token: otherRead });
    expect(cross.status).toBe(404);
    expect(json(cross.bytes).message).toBe('Service not found');
    // An unbound token must name the service; a bound one may not name another environment.
    const unnamed = await post('/v1/traces', body, { headers: { 'x-service-id': '' } });
    expect(unnamed.status).toBe(400);
    expect(json(unnamed.bytes).message).toMatch(/X-Service-Id/);
    expect((await post('/v1/traces', body, { token: bound, headers: { 'x-environment': 'staging' } })).status).toBe(404);
    expect((await post('/v1/traces', body, { headers: { 'x-environment': 'prod' } })).status).toBe(400);
    expect((await post('/v1/traces', body, { headers: { 'x-service-id': 'svc_missing' } })).status).toBe(404);
    // A member's session may post only with its CSRF token, as every cookie-session mutation.
    const sessionNoCsrf = await post('/v1/traces', body, { token: undefined, headers: { cookie: p.viewer.cookie } });
    expect(sessionNoCsrf.status).toBe(403);
    expect(json(sessionNoCsrf.bytes).message).toMatch(/CSRF/);
    const [stored] = await rows<{ n: string }>(`SELECT count() AS n FROM evaluation_events WHERE flag_key = 'otlp-refused'`, {});
    expect(Number(stored.n)).toBe(0);

    // A bound token needs no headers: its own service and environment.
    expect((await post('/v1/traces', body, { token: bound, headers: { 'x-service-id': '', 'x-environment': '' } })).status).toBe(200);
    const [bounded] = await rows<{ environment: string }>(`SELECT environment FROM evaluation_events WHERE flag_key = 'otlp-refused'`, {});
    expect(bounded.environment).toBe('production');
  });

  it('answers malformed, unsupported and oversized bodies with a google.rpc.Status in the request encoding', async () => {
    const garbage = await post('/v1/traces', Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]));
    expect(garbage.status).toBe(400);
    expect(garbage.headers.get('content-type')).toMatch(/^application\/x-protobuf/);
    const status = fromBinary(StatusSchema, garbage.bytes);
    expect(status.code).toBe(3);
    expect(status.message).toMatch(/^The protobuf body could not be decoded/);

    const badJson = await post('/v1/traces', '{"resourceSpans": [', { type: 'application/json' });
    expect(badJson.status).toBe(400);
    expect(json(badJson.bytes)).toEqual({ code: 3, message: 'Malformed JSON body' });
    const notHex = await post('/v1/traces', JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: 'not-hex', spanId: 'eee19b7ec3c1b173' }] }] }] }), { type: 'application/json' });
    expect(notHex.status).toBe(400);
    expect(json(notHex.bytes).message).toBe('traceId must be hex-encoded');
    const wrongType = await post('/v1/traces', 'hello', { type: 'text/plain' });
    expect(wrongType.status).toBe(415);
    expect(json(wrongType.bytes).message).toMatch(/application\/x-protobuf or application\/json/);
    const badGzip = await post('/v1/traces', someSpans(), { headers: { 'content-encoding': 'gzip' } });
    expect(badGzip.status).toBe(400);

    // Over 10 MB declared, and a small gzip body that inflates past 10 MB.
    const big = await post('/v1/traces', Buffer.alloc(10 * 1024 * 1024 + 1));
    expect(big.status).toBe(413);
    const bomb = await post('/v1/traces', Buffer.alloc(11 * 1024 * 1024), { gzip: true });
    expect(bomb.status).toBe(413);
    expect(fromBinary(StatusSchema, bomb.bytes).message).toMatch(/once decompressed/);
  });

  it('limits requests per token: 429 with Retry-After', async () => {
    const limited = await startTestApp({ RATE_LIMIT_PER_TOKEN: '3', RATE_LIMIT_PER_IP: '100000' });
    try {
      const project = await createProject(limited);
      const token = await opaqueToken(project.owner, project.projectId, { read: true });
      const body = someSpans();
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`${limited.urls.ingest}/v1/traces`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-protobuf', authorization: `Bearer ${token}`, 'x-service-id': project.serviceId },
          body: Buffer.from(body),
        });
        statuses.push(res.status);
        if (res.status === 429) retryAfter = res.headers.get('retry-after');
        await res.arrayBuffer();
      }
      expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(3);
      expect(statuses.at(-1)).toBe(429);
      expect(Number(retryAfter)).toBeGreaterThan(0);
    } finally {
      await limited.stop();
    }
  });
});
