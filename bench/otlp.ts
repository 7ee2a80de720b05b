/**
 * `npm run bench:otlp` (docs/opentelemetry.md#throughput): OpenTelemetry traces into chDB on the
 * embedded profile (no DATABASE_URL, REDIS_URL, CLICKHOUSE_URL or TEMPORAL_ADDRESS is used; the
 * platform runs in this process with a fresh data directory).
 *
 * The traffic: BENCH_SPANS (300,000) spans as the OpenTelemetry JS SDK makes them, serialized
 * with its protobuf serializer into bodies of BENCH_BATCH (1,000) spans, the size a batch span
 * processor exports. Each request trace is a server root span and a child that evaluated one of
 * 20 flags (a `feature_flag.evaluation` span event with the context id, value and variant); 2%
 * of the roots end with an error status. One flag has a 50% partial rollout, so its exposures
 * are placed on a rollout side as a canary gate counts them.
 *
 * 1. Baseline, in the same run: the same bodies through the route's decode and derive steps in a
 *    bare loop after a warm-up (no HTTP, no writer, no chDB): what OTLP decoding alone costs.
 * 2. Ingest: the bodies posted to /v1/traces on the ingest listener, BENCH_CONCURRENCY (4) in
 *    flight, until every body is answered and the writer has inserted every row; spans/s over
 *    that time, and the CPU-seconds the process spent (a figure a busy host changes less). The
 *    rows in chDB are counted against what was sent.
 * 3. Freshness: one more body for the rollout flag after the ingest, then the canary gate's
 *    warehouse read (CanaryWarehouse.cohorts) is polled, without forcing a flush, until it sees
 *     every exposure and error of that body; the time from sending the post to that read.
 * 4. A table of the figures with their bars (yes/NO).
 *
 * `npm run bench:otlp` runs node with --max-semi-space-size=64, as scripts/run-api.sh runs every
 * process with the ingest role (docs/opentelemetry.md#throughput).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ANY_FREE_PORTS, parseConfig } from '../api/config';
import { CanaryWarehouse } from '../api/features/canary/warehouse';
import { decodeRequest, HEX_ID_FIELDS } from '../api/features/analytics/otlp-body';
import { deriveFromTraces, TraceJoin } from '../api/features/analytics/otlp-outcomes';
import { selectRows } from '../api/features/analytics/queries/clickhouse';
import { bucket, ROLLOUT_SALT, rolloutThreshold } from '../api/features/evaluation/engine/index';
import { ExportTraceServiceRequestSchema } from '../api/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import { createLogger } from '../api/infra/logger';
import { createPlatform, startRoles } from '../api/server';
import { call, signUp } from './server-process';

const SPANS = Number(process.env.BENCH_SPANS ?? 300_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 1_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 4);
const BARS = { spansPerSecond: 50_000, freshnessMs: 10_000 };
/** How long the freshness step polls at most before it reports the gate never saw the spans. */
const FRESHNESS_LIMIT_MS = 60_000;

const FLAGS = 20;
const ROLLOUT_FLAG = 'otlp-bench-canary';
const USERS = 50_000;
const ERROR_SHARE = 0.02;

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/**
 * Protobuf bodies of `traces` request traces each (a root and its evaluating child), as the SDK's
 * serializer writes them; `flagOf` and `failing` choose each trace's flag and error status.
 */
function traceBodies(count: number, traces: number, flagOf: (t: number) => string, failing: (t: number) => boolean): Buffer[] {
  const memory = new InMemorySpanExporter();
  const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] }).getTracer('checkout-app');
  const bodies: Buffer[] = [];
  let t = 0;
  for (let b = 0; b < count; b++) {
    for (let i = 0; i < traces; i++, t++) {
      const flagKey = flagOf(t);
      const user = `user-${(t * 7_919) % USERS}`;
      const value = flagKey === ROLLOUT_FLAG ? bucket(flagKey, user, ROLLOUT_SALT) < rolloutThreshold(50) : t % 3 === 0;
      const root = tracer.startSpan('POST /checkout', { kind: SpanKind.SERVER });
      const child = tracer.startSpan('evaluate flags', {}, trace.setSpan(ROOT_CONTEXT, root));
      child.addEvent('feature_flag.evaluation', {
        'feature_flag.key': flagKey,
        'feature_flag.provider.name': 'flagd',
        'feature_flag.result.reason': 'targeting_match',
        'feature_flag.context.id': user,
        'feature_flag.result.variant': value ? 'on' : 'off',
        'feature_flag.result.value': value,
      });
      child.end();
      if (failing(t)) root.setStatus({ code: SpanStatusCode.ERROR, message: 'checkout failed' });
      root.end();
    }
    bodies.push(Buffer.from(ProtobufTraceSerializer.serializeRequest(memory.getFinishedSpans())!));
    memory.reset();
  }
  return bodies;
}

async function main() {
  const benchStarted = performance.now();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-otlp-bench-'));
  // The embedded profile: none of the backends' URLs, whatever the shell has set.
  const env = { ...process.env };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'CLICKHOUSE_URL', 'TEMPORAL_ADDRESS']) delete env[name];
  const config = parseConfig({
    ...env,
    NODE_ENV: 'test',
    ...ANY_FREE_PORTS,
    ROLES: 'control,data,ingest',
    DATA_DIR: dataDir,
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    SCRYPT_COST_LOG2: '12',
    DEMO_SEED: 'false',
    RATE_LIMIT_PER_IP: '1000000000',
    RATE_LIMIT_PER_TOKEN: '1000000000',
    RATE_LIMIT_PER_SERVICE: '1000000000',
  });
  // A platform that fails to start leaves its data directory behind otherwise.
  const platform = await createPlatform(config, createLogger(config.LOG_LEVEL)).catch((error: unknown) => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw error;
  });
  const running = await startRoles(platform, config.ROLES);
  try {
    const api = running.urls.control!;
    const ingestUrl = `${running.urls.ingest!}/v1/traces`;
    const as = await signUp(api);
    const project = (await call('POST', `${api}/api/projects`, { ...as, body: { name: 'OTLP bench' } })).body;
    const service = (await call('POST', `${api}/api/services`, { ...as, body: { projectId: project.id, name: 'checkout' } })).body;
    const token = (await call('POST', `${api}/api/projects/${project.id}/tokens`, { ...as, body: { name: 'bench', permissions: { read: true } } })).body.value as string;
    await call('POST', `${api}/api/flags`, {
      ...as,
      body: {
        key: ROLLOUT_FLAG, name: ROLLOUT_FLAG, type: 'boolean', serviceId: service.id, environment: 'production', enabled: true, defaultValue: false,
        targeting: [{ id: 'canary', conditions: [], value: true, rolloutPercentage: 50 }],
      },
    });
    // The data plane's snapshot holds the flag once an evaluation answers its rule's value.
    for (let tries = 0; ; tries++) {
      const res = await fetch(`${running.urls.data}/api/flags/evaluate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ flagKey: ROLLOUT_FLAG, serviceId: service.id, environment: 'production', context: { targetingKey: 'probe' } }),
      });
      const body = (await res.json()) as { value?: unknown };
      if (res.status === 200 && typeof body.value === 'boolean') break;
      if (tries > 1_000) throw new Error(`the rollout flag never evaluated: ${res.status} ${JSON.stringify(body)}`);
      await new Promise((r) => setTimeout(r, 25));
    }

    const traces = Math.max(1, Math.floor(BATCH / 2));
    const count = Math.max(1, Math.round(SPANS / (traces * 2)));
    const flags = Array.from({ length: FLAGS }, (_, i) => (i === 0 ? ROLLOUT_FLAG : `otlp-bench-${i}`));
    const built = performance.now();
    const bodies = traceBodies(count, traces, (t) => flags[t % FLAGS], (t) => (t * 2_654_435_761) % 1_000 < ERROR_SHARE * 1_000);
    const spans = count * traces * 2;
    const roots = count * traces;
    const bytes = bodies.reduce((s, b) => s + b.length, 0);
    console.log(`${fmt(spans)} spans (${fmt(roots)} traces) in ${count} protobuf bodies of ${traces * 2} spans, ${(bytes / 1e6).toFixed(1)} MB, built in ${((performance.now() - built) / 1000).toFixed(1)} s`);

    // 1. Baseline: decode and derive alone, after a warm-up pass over a tenth of the bodies.
    const tenant = { projectId: project.id as string, serviceId: service.id as string, environment: 'production' };
    const decodeAndDerive = (some: Buffer[]) => {
      const join = new TraceJoin();
      let rows = 0;
      for (const body of some) {
        const derived = deriveFromTraces(decodeRequest(ExportTraceServiceRequestSchema, body, 'protobuf', HEX_ID_FIELDS.traces), tenant, join, Date.now());
        rows += derived.exposures.length + derived.outcomes.length;
      }
      return rows;
    };
    decodeAndDerive(bodies.slice(0, Math.ceil(bodies.length / 10)));
    const decodeStarted = performance.now();
    const derivedRows = decodeAndDerive(bodies);
    const decodeSeconds = (performance.now() - decodeStarted) / 1000;
    console.log(`baseline (decode + derive, no HTTP, no writer): ${fmt(spans / decodeSeconds)} spans/s, ${fmt(derivedRows)} rows derived`);

    // 2. Ingest over HTTP into chDB through the writer.
    const headers = { 'content-type': 'application/x-protobuf', authorization: `Bearer ${token}`, 'x-service-id': service.id, 'x-environment': 'production' };
    const post = async (body: Buffer) => {
      const res = await fetch(ingestUrl, { method: 'POST', headers, body });
      const answer = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200) throw new Error(`POST /v1/traces: ${res.status} ${answer.toString('utf8').slice(0, 300)}`);
      if (answer.length > 0) throw new Error(`POST /v1/traces answered a partial success (${answer.length} bytes)`);
    };
    const ingestStarted = performance.now();
    const cpuBefore = process.cpuUsage();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < bodies.length) await post(bodies[next++]);
      }),
    );
    const answeredSeconds = (performance.now() - ingestStarted) / 1000;
    await platform.analyticsWriter.flush();
    const ingestSeconds = (performance.now() - ingestStarted) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    const [stored] = await selectRows<{ exposures: string; outcomes: string }>(
      platform.analytics,
      `SELECT (SELECT count() FROM evaluation_events WHERE project_id = {p:String} AND source = 'otlp') AS exposures,
              (SELECT count() FROM outcome_events WHERE project_id = {p:String}) AS outcomes`,
      { p: project.id },
    );
    const spansPerSecond = spans / ingestSeconds;
    console.log(
      `ingest: every body answered after ${answeredSeconds.toFixed(1)} s, every row inserted after ${ingestSeconds.toFixed(1)} s: ${fmt(spansPerSecond)} spans/s; ` +
        `in chDB ${fmt(Number(stored.exposures))} exposures (sent ${fmt(roots)}), ${fmt(Number(stored.outcomes))} outcome rows; ` +
        `${cpuSeconds.toFixed(1)} CPU-seconds in this process (HTTP client, server, writer and chDB's threads), ${fmt(spans / cpuSeconds)} spans per CPU-second`,
    );

    // 3. Freshness: the last span to the canary gate's read, with the writer flushing on its own schedule.
    const from = Date.now() - 1;
    const fresh = traceBodies(1, traces, () => ROLLOUT_FLAG, (t) => t % 10 === 0)[0];
    const scope = { projectId: project.id, serviceId: service.id, environment: 'production', flagKey: ROLLOUT_FLAG, ruleId: 'canary', treatmentValue: 'true', conditionsAlwaysHold: true };
    const before = await new CanaryWarehouse(platform.analytics).cohorts(scope, from, from + FRESHNESS_LIMIT_MS * 2);
    const seenBefore = before.treatment.exposures + before.control.exposures;
    const sent = performance.now();
    await post(fresh);
    let freshnessMs = Infinity;
    let last = before;
    while (performance.now() - sent < FRESHNESS_LIMIT_MS) {
      const c = (last = await new CanaryWarehouse(platform.analytics).cohorts(scope, from, from + FRESHNESS_LIMIT_MS * 2));
      if (c.treatment.exposures + c.control.exposures - seenBefore >= traces && c.treatment.errors + c.control.errors >= Math.ceil(traces / 10)) {
        freshnessMs = performance.now() - sent;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!Number.isFinite(freshnessMs)) console.log(`the gate's last read (before the body: ${JSON.stringify(before)}): ${JSON.stringify(last)}`);
    console.log(`freshness: the canary gate's read saw the last body ${Number.isFinite(freshnessMs) ? `${fmt(freshnessMs)} ms` : 'never'} after its post was sent (EVAL_EVENTS_FLUSH_MS ${config.EVAL_EVENTS_FLUSH_MS}, ANALYTICS_FLUSH_MS ${config.ANALYTICS_FLUSH_MS})`);

    const allStored = Number(stored.exposures) === roots && Number(stored.outcomes) >= roots;
    console.log('\n## OTLP ingest (embedded profile, chDB in-process, through the writer)\n');
    console.log('| path | spans | seconds | spans/s | spans per CPU-second |\n|---|---|---|---|---|');
    console.log(`| baseline: decode + derive in a loop | ${fmt(spans)} | ${decodeSeconds.toFixed(1)} | ${fmt(spans / decodeSeconds)} | |`);
    console.log(`| POST /v1/traces (protobuf, ${CONCURRENCY} in flight) into chDB | ${fmt(spans)} | ${ingestSeconds.toFixed(1)} | ${fmt(spansPerSecond)} | ${fmt(spans / cpuSeconds)} |`);
    console.log(`\nHTTP + writer + chDB cost ${(decodeSeconds > 0 ? ingestSeconds / decodeSeconds : 0).toFixed(1)}x the bare decode loop's time.`);
    const bars: [string, string, boolean][] = [
      [`ingest >= ${fmt(BARS.spansPerSecond)} spans/s, every exposure stored`, `${fmt(spansPerSecond)}/s`, spansPerSecond >= BARS.spansPerSecond && allStored],
      [`last span to the canary gate < ${BARS.freshnessMs / 1000} s`, Number.isFinite(freshnessMs) ? `${(freshnessMs / 1000).toFixed(1)} s` : 'never', freshnessMs < BARS.freshnessMs],
    ];
    console.log('\n| bar | measured | met |\n|---|---|---|');
    for (const [bar, value, met] of bars) console.log(`| ${bar} | ${value} | ${met ? 'yes' : 'NO'} |`);
    const [load1, load5] = os.loadavg().map((n) => n.toFixed(1));
    console.log(`\n(${os.cpus().length} cores shared with whatever else runs: load average ${load1} (1 min), ${load5} (5 min) at the end; total bench ${Math.round((performance.now() - benchStarted) / 1000)} s)`);
    // scripts/run-api.sh gives every ingesting process --max-semi-space-size=64; npm run bench:otlp does the same.
    console.log(`(node ${process.version}, V8 flags: ${process.execArgv.filter((a) => a.startsWith('--max-')).join(' ') || 'none'})`);
  } finally {
    await running.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
