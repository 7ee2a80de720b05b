/**
 * `npm run bench:eval`: throughput and latency of the evaluation hot paths against a bare
 * node:http route and a bare Express route, same process, same load generator, same run.
 *
 *   1. bare node:http   POST, constant JSON body of the same size as the REST answer
 *   2. bare Express     the same through Express 5 (one route, no middleware)
 *   3. REST single      POST /api/flags/evaluate with an opaque project token (lean path)
 *   4. OFREP single     POST /api/ofrep/v1/evaluate/flags/{key} with the same token (lean path)
 *   6. demo 4096        POST /api/flags/evaluate/batch on the demo service, 4,096 `key` items, no token
 *   7. bulk 5/50/500    POST /api/ofrep/v1/evaluate/flags (OFREP bulk): every flag of a service of
 *                       5, 50 or 500 boolean flags with 10% rollouts, for one context
 *   8. batch 5/50/100   POST /api/flags/evaluate/batch (Express) naming those flags; 100 is the
 *                       route's limit (docs/limits.md), so batch 100 names the first 100 of the 500
 *
 * The per-flag cost of the all-flags paths: server CPU per request (CPU time / requests) minus
 * bare node:http's, divided by the flags the request carried.
 *
 * For each: a closed-loop autocannon run with 50 connections gives the peak (req/s, p50, p99); an
 * open-loop run at half that rate gives the p99 the quality bar speaks of. The open-loop run is
 * bench/open-loop.ts, not autocannon -R: autocannon's rate limit is closed-loop bursts (each
 * connection sends its share of the second as fast as it can, then waits), see that file. Its
 * latencies count from each request's scheduled send time (coordinated-omission corrected), so
 * they include the generator's own scheduling jitter: the bare node:http row shows that floor.
 * Peaks run in BENCH_ROUNDS (3) interleaved rounds; a ratio is req/s relative to bare node:http in
 * the same round, and the median over the rounds is reported (the machine drifts between runs).
 *
 * The server runs in a child process pinned to CPU 0 (bench/eval-server.ts), autocannon here on
 * CPU 1 (taskset, when available). Rate limits are raised in the server (RATE_LIMIT_PER_IP,
 * RATE_LIMIT_PER_TOKEN, RATE_LIMIT_PER_SERVICE = 1e9), the documented way to benchmark.
 * Backends: DATABASE_URL / REDIS_URL / TEMPORAL_ADDRESS when set (e.g. after
 * `source scripts/test-infra.sh up`: the production profile), the embedded profile otherwise.
 *
 * Environment: BENCH_DURATION (seconds per run, default 8), BENCH_CONNECTIONS (default 50),
 * BENCH_ONLY (comma-separated scenario names), BENCH_ROUNDS (default 3), BENCH_EVENTS=off (evaluation events are dropped and
 * counted instead of going into the in-process chDB: the request path as on the production
 * profile, where ClickHouse is another machine), BENCH_SERVER_NODE_ARGS (extra node flags for the
 * server, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`).
 *
 * Tracing's cost (docs/operations.md#tracing), on the production profile (the split run): a
 * second data-plane process with OTEL_EXPORTER_OTLP_ENDPOINT set (spans to a sink in this process,
 * sampler at its default, parent-based 1%, or BENCH_TRACING_RATIO) against the one without, on
 * REST single and OFREP single, in BENCH_ROUNDS interleaved rounds (the order alternates each
 * round); the median ratio of req/s is reported (bar: at least 85%). BENCH_TRACING=off skips it.
 */
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import postgres from 'postgres';
import { openLoop } from './open-loop';
import { ask, call, signUp, startEvalServer, stopServer, type ServerUrls } from './server-process';
import { reportedUrl, startScript } from './memory-procs';
import { fmt, median, pinSelf } from './report';
import type { ThreadTimes } from './eval-server';

const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DEMO_SEQUENTIAL = 500;
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));

interface Scenario {
  name: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

interface Row {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  openRate: number;
  openP50: number;
  openP99: number;
  /** Longest server event-loop stall during the open-loop run (warm-up included). */
  openStallMs: number;
  errors: number;
  /** Server CPU time / wall time during the peak run: near 1 means the server was the bottleneck. */
  serverCpu: number;
  /** Median over the rounds of req/s relative to bare node:http in the same round. */
  ratio: number | undefined;
}


// BENCH_SERVER_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", profiles the server.
const PROFILE_ARGS = process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
const startServer = (pinned: boolean, env: Record<string, string> = {}, profiled = true) =>
  startEvalServer({ pinned, env, nodeArgs: profiled ? PROFILE_ARGS : [] });

/** A project, service, flags and an opaque read token, made through the public API. */
async function setUp(urls: ServerUrls) {
  const api = urls.control;
  const as = await signUp(api);
  const project = (await call('POST', `${api}/api/projects`, { ...as, body: { name: 'Bench' } })).body;
  const service = (await call('POST', `${api}/api/services`, { ...as, body: { projectId: project.id, name: 'bench' } })).body;
  const flagKey = 'bench-checkout';
  await call('POST', `${api}/api/flags`, {
    ...as,
    body: {
      key: flagKey,
      serviceId: service.id,
      environment: 'production',
      type: 'boolean',
      enabled: true,
      defaultValue: false,
      targeting: [{ conditions: [{ property: 'plan', operator: 'in', value: ['gold', 'platinum'] }], value: true, rolloutPercentage: 50 }],
    },
  });
  const sized = new Map<number, string>();
  for (const size of FLAG_SET_SIZES) {
    const set = (await call('POST', `${api}/api/services`, { ...as, body: { projectId: project.id, name: `bench-${size}` } })).body;
    sized.set(size, set.id as string);
    const flags = Array.from({ length: size }, (_, i) => ({
      key: `set-${i}`,
      serviceId: set.id,
      environment: 'production',
      type: 'boolean',
      enabled: true,
      defaultValue: false,
      targeting: [{ conditions: [], value: true, rolloutPercentage: 10 }],
    }));
    for (let i = 0; i < flags.length; i += 100) await call('POST', `${api}/api/flags/bulk`, { ...as, body: { flags: flags.slice(i, i + 100) } });
  }
  const token = (await call('POST', `${api}/api/projects/${project.id}/tokens`, { ...as, body: { name: 'bench', permissions: { read: true } } })).body.value;
  const demo = (await call('GET', `${api}/api/demo`)).body.services[0]?.serviceId as string | undefined;
  return { serviceId: service.id as string, flagKey, token: token as string, demo, sized };
}

/** Flags per service of the all-flags scenarios (bulk N, batch N). */
const FLAG_SET_SIZES = [5, 50, 500] as const;
/** Flags one batch request may name (docs/limits.md). */
const BATCH_LIMIT = 100;

/** Waits until the data plane's snapshot serves every flag of each sized service (they arrive over the bus). */
async function awaitFlagSets(data: string, auth: Record<string, string>, sized: Map<number, string>) {
  for (const [size, serviceId] of sized) {
    for (let i = 0; i < 400; i++) {
      const res = await fetch(`${data}/api/ofrep/v1/evaluate/flags`, {
        method: 'POST',
        headers: { ...auth, 'x-service-id': serviceId, 'x-environment': 'production' },
        body: JSON.stringify({ context: { targetingKey: 'user-1234' } }),
      });
      if (((await res.json()) as { flags?: unknown[] }).flags?.length === size) break;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

function run(s: Scenario): Promise<autocannon.Result> {
  return autocannon({ url: s.url, method: 'POST', headers: s.headers, body: s.body, connections: CONNECTIONS, duration: DURATION });
}

interface CpuSample {
  usage: NodeJS.CpuUsage;
  at: number;
}

interface Peak {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** Server CPU time / wall time during the run. */
  cpu: number;
}

/** One closed-loop run at full load (after a short warm-up of the same route). */
async function peakRun(child: ChildProcess, s: Scenario): Promise<Peak> {
  await autocannon({ url: s.url, method: 'POST', headers: s.headers, body: s.body, connections: CONNECTIONS, duration: 1 });
  const before = await ask<CpuSample>(child, { type: 'cpu' }, 'cpu');
  const peak = await run(s);
  const after = await ask<CpuSample>(child, { type: 'cpu' }, 'cpu');
  const cpu = (after.usage.user + after.usage.system - before.usage.user - before.usage.system) / 1000 / (after.at - before.at);
  return { rps: peak.requests.average, p50: peak.latency.p50, p99: peak.latency.p99, errors: peak.errors + peak.non2xx, cpu };
}

/** The open-loop run at half of `rps`, and the server's longest event-loop stall meanwhile. */
async function halfLoad(child: ChildProcess, s: Scenario, rps: number) {
  const rate = Math.max(1, Math.floor(rps / 2));
  await ask(child, { type: 'loop-delay' }, 'loop-delay');
  const open = await openLoop({ url: s.url, method: 'POST', headers: s.headers, body: s.body, rate, durationMs: DURATION * 1000, connections: CONNECTIONS, warmupMs: 1000 });
  const stall = await ask<{ p99: number; max: number }>(child, { type: 'loop-delay' }, 'loop-delay');
  return { rate, open, stallMs: stall.max };
}


/**
 * Sequential requests: the handler's own time (`_debug.totalMs`: snapshot, limits, evaluation),
 * the whole server time (headers parsed -> answer written, from the server's
 * http.server.request.start / response.finish diagnostics channels: body read and parse,
 * validation, handler and JSON answer) and the round trip seen by the client.
 */
async function serverTime(child: ChildProcess, url: string, body: string, headers: Record<string, string>, n: number) {
  const handler: number[] = [];
  const roundTrip: number[] = [];
  await ask(child, { type: 'server-times-start' }, 'server-times-started');
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const res = await fetch(`${url}?debug=true`, { method: 'POST', headers, body });
    const text = await res.text();
    roundTrip.push(performance.now() - started);
    const json = JSON.parse(text) as { _debug?: { totalMs: number } };
    if (json._debug) handler.push(json._debug.totalMs);
  }
  const { times: server, afterBody, threads } = await ask<{ times: number[]; afterBody: number[]; threads: ThreadTimes[] }>(child, { type: 'server-times' }, 'server-times');
  // The slowest 1% (those at or above the p99), each with where its time went.
  const slowest = afterBody
    .map((ms, i) => ({ ms, threads: threads[i] }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, Math.max(1, n - Math.floor(n * 0.99)));
  const stats = (xs: number[]) => {
    xs.sort((a, b) => a - b);
    return { p50: xs[Math.floor(xs.length / 2)], p99: xs[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))], max: xs[xs.length - 1] };
  };
  return { handler: stats(handler), server: stats(server), afterBody: stats(afterBody), roundTrip: stats(roundTrip), slowest };
}


async function main() {
  // BENCH_PIN=0 leaves scheduling to the OS (the server's helper threads may then use CPU 1 too).
  const pinned = process.env.BENCH_PIN !== '0' && pinSelf(1);
  const split = await startSplit(pinned);
  const { child, urls } = split ?? (await startServer(pinned));
  try {
    const { serviceId, flagKey, token, demo, sized } = await setUp(urls);
    const evalBody = JSON.stringify({ flagKey, serviceId, environment: 'production', context: { targetingKey: 'user-1234', plan: 'gold' } });
    const auth = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
    // Wait until the snapshot serves the flag (it arrives over the bus), and size the bare body like the answer.
    let answer = '';
    for (let i = 0; i < 200 && !answer.includes('TARGETING_MATCH') && !answer.includes('DEFAULT'); i++) {
      answer = await (await fetch(`${urls.data}/api/flags/evaluate`, { method: 'POST', headers: auth, body: evalBody })).text();
      await new Promise((r) => setTimeout(r, 25));
    }
    const constant = JSON.stringify({ flagKey: 'x'.repeat(Math.max(1, flagKey.length)), value: true, reason: 'TARGETING_MATCH' }).padEnd(answer.length, ' ');
    await ask(child, { type: 'body', body: constant }, 'body-set');

    const demoBody = demo
      ? JSON.stringify({ serviceId: demo, environment: 'development', flags: Array.from({ length: 4096 }, (_, i) => ({ key: `px-${i}` })), context: {} })
      : '';
    const json = { 'content-type': 'application/json' };
    await awaitFlagSets(urls.data, auth, sized);
    const flagSetScenarios: Scenario[] = [...sized].flatMap(([size, id]) => {
      const named = Math.min(size, BATCH_LIMIT);
      return [
        {
          name: `bulk ${size}`,
          url: `${urls.data}/api/ofrep/v1/evaluate/flags`,
          headers: { ...auth, 'x-service-id': id, 'x-environment': 'production' },
          body: JSON.stringify({ context: { targetingKey: 'user-1234' } }),
        },
        {
          name: `batch ${named}`,
          url: `${urls.data}/api/flags/evaluate/batch`,
          headers: auth,
          body: JSON.stringify({ serviceId: id, environment: 'production', flags: Array.from({ length: named }, (_, i) => ({ flagKey: `set-${i}` })), context: { targetingKey: 'user-1234' } }),
        },
      ];
    });
    const scenarios: Scenario[] = [
      { name: 'bare node:http', url: `${urls.bare}/bare`, headers: auth, body: evalBody },
      { name: 'bare Express', url: `${urls.express}/bare`, headers: auth, body: evalBody },
      { name: 'REST single', url: `${urls.data}/api/flags/evaluate`, headers: auth, body: evalBody },
      {
        name: 'OFREP single',
        url: `${urls.data}/api/ofrep/v1/evaluate/flags/${flagKey}`,
        headers: { ...auth, 'x-service-id': serviceId, 'x-environment': 'production' },
        body: JSON.stringify({ context: { targetingKey: 'user-1234', plan: 'gold' } }),
      },
      ...(demo ? [{ name: 'demo 4096', url: `${urls.data}/api/flags/evaluate/batch`, headers: json, body: demoBody }] : []),
      ...flagSetScenarios,
    ].filter((s) => !ONLY || ONLY.includes(s.name));

    console.log(
      `bench:eval  ${DURATION}s per run, ${CONNECTIONS} connections, ` +
        `${split ? 'a data-plane process (ROLES=data; setup through a separate control-plane process)' : 'one process with control and data roles'}, ` +
        `server ${pinned ? 'on CPU 0, load generators on CPU 1' : 'unpinned'}, ` +
        `evaluation events ${process.env.BENCH_EVENTS === 'off' ? 'dropped (BENCH_EVENTS=off)' : split ? 'sent to ClickHouse in another process (the chDB shim, CPU 1)' : 'written to ClickHouse (chDB in-process)'}`,
    );
    console.log(`body: ${answer.length} bytes (${answer})`);
    // Peaks in ROUNDS interleaved rounds (every scenario once per round): the machine drifts,
    // so each ratio is taken within a round and the median of the rounds is reported.
    const peaks = new Map<string, Peak[]>(scenarios.map((s) => [s.name, []]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const s of scenarios) {
        const peak = await peakRun(child, s);
        peaks.get(s.name)!.push(peak);
        console.log(`  round ${round}/${ROUNDS} ${s.name}: ${fmt(peak.rps)} req/s`);
      }
    }
    const bareRuns = peaks.get('bare node:http');
    const ratios = new Map<string, number[]>();
    if (bareRuns) for (const s of scenarios) ratios.set(s.name, peaks.get(s.name)!.map((p, i) => p.rps / bareRuns[i].rps));
    const rows: Row[] = [];
    for (const s of scenarios) {
      const runs = peaks.get(s.name)!;
      const typical = runs.find((p) => p.rps === median(runs.map((r) => r.rps)))!;
      const half = await halfLoad(child, s, typical.rps);
      rows.push({
        name: s.name,
        rps: typical.rps,
        p50: typical.p50,
        p99: typical.p99,
        openRate: half.rate,
        openP50: half.open.p50,
        openP99: half.open.p99,
        openStallMs: half.stallMs,
        errors: runs.reduce((n, p) => n + p.errors, 0) + half.open.failed,
        serverCpu: typical.cpu,
        ratio: ratios.has(s.name) ? median(ratios.get(s.name)!) : undefined,
      });
      console.log(`  measured ${s.name} at half load`);
    }
    console.log('');
    // Requests per second of server CPU: the same ratio, robust to other processes taking the core.
    const perCpu = (r: Row) => r.rps / Math.max(r.serverCpu, 0.01);
    const baseCpu = rows.find((r) => r.name === 'bare node:http');
    console.log('| route | req/s | p50 ms | p99 ms | open-loop rate | open p50 ms | open p99 ms (CO-corrected) | server loop stall max ms | ratio to node:http (median of rounds) | server CPU | req per CPU-s | ratio per CPU-s | errors |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) {
      console.log(
        `| ${r.name} | ${fmt(r.rps)} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${fmt(r.openRate)} | ${fmt(r.openP50, 2)} | ${fmt(r.openP99, 2)} | ${fmt(r.openStallMs, 1)} | ${r.ratio !== undefined ? fmt(r.ratio, 2) : '-'} | ${fmt(r.serverCpu * 100)}% | ${fmt(perCpu(r))} | ${baseCpu ? fmt(perCpu(r) / perCpu(baseCpu), 2) : '-'} | ${r.errors} |`,
      );
    }
    const perFlag = rows.filter((r) => /^(bulk|batch) \d+$/.test(r.name));
    if (baseCpu && perFlag.length > 0) {
      // Server CPU per request beyond bare node:http's, spread over the flags the answer carried.
      const cpuPerRequestUs = (r: Row) => (Math.max(r.serverCpu, 0.01) / r.rps) * 1e6;
      console.log('');
      console.log('| all-flags route | flags | server CPU per request µs | beyond bare node:http µs | per flag µs |');
      console.log('|---|---:|---:|---:|---:|');
      for (const r of perFlag) {
        const flags = Number(r.name.split(' ')[1]);
        const beyond = cpuPerRequestUs(r) - cpuPerRequestUs(baseCpu);
        console.log(`| ${r.name.split(' ')[0]} | ${flags} | ${fmt(cpuPerRequestUs(r), 1)} | ${fmt(beyond, 1)} | ${fmt(beyond / flags, 2)} |`);
      }
    }
    if (demo && (!ONLY || ONLY.includes('demo 4096'))) {
      // 500 requests, so the p99 is the fifth slowest rather than the slowest of a few.
      const t = await serverTime(child, `${urls.data}/api/flags/evaluate/batch`, demoBody, json, DEMO_SEQUENTIAL);
      console.log('');
      console.log(
        `demo 4096, ${DEMO_SEQUENTIAL} sequential requests: server time from the last body byte to the answer written ` +
          `p50 ${fmt(t.afterBody.p50, 2)} ms, p99 ${fmt(t.afterBody.p99, 2)} ms (bar: p99 < 10 ms), max ${fmt(t.afterBody.max, 2)} ms; ` +
          `from the headers (the body's arrival included) p50 ${fmt(t.server.p50, 2)} ms, p99 ${fmt(t.server.p99, 2)} ms, max ${fmt(t.server.max, 2)} ms; ` +
          `handler (_debug.totalMs, from the headers) p50 ${fmt(t.handler.p50, 2)} ms, p99 ${fmt(t.handler.p99, 2)} ms; ` +
          `round trip seen by the client p50 ${fmt(t.roundTrip.p50, 2)} ms, p99 ${fmt(t.roundTrip.p99, 2)} ms`,
      );
      console.log(
        `  the slowest 1%: server time, of it the JavaScript thread ready but waiting for its core, and the server's other threads ` +
          `(V8's compiler and collector helpers, libuv's pool) on that core meanwhile; waiting beyond those is another process on the core: ` +
          t.slowest.map(({ ms, threads: x }) => `${fmt(ms, 1)} ms (waiting ${fmt(x.waiting, 1)}, other threads ${fmt(x.otherThreads, 1)})`).join('; '),
      );
    }
    const bars = rows.filter((r) => r.name === 'REST single' || r.name === 'OFREP single');
    for (const r of bars) {
      const floor = rows.find((b) => b.name === 'bare node:http')?.openP99;
      const rounds = ratios.get(r.name)?.map((x) => fmt(x, 2)).join(', ') ?? '-';
      console.log(
        `${r.name}: ${r.ratio !== undefined ? fmt(r.ratio * 100) : '-'}% of bare node:http (rounds: ${rounds}; bar >= 50%, goal 70%); ` +
          `open-loop p99 ${fmt(r.openP99, 1)} ms (bar < 5 ms` +
          `${floor !== undefined ? `; bare node:http at its own half load: ${fmt(floor, 1)} ms` : ''})`,
      );
    }
    if (process.env.BENCH_TRACING !== 'off') await tracingCost(split, child, urls, scenarios.filter((s) => TRACED_SCENARIOS.includes(s.name)));
  } finally {
    await stopServer(child);
    await split?.stop();
  }
}

/** The lean-path routes whose cost with tracing on the bar speaks of. */
const TRACED_SCENARIOS = ['REST single', 'OFREP single'];

/** An OTLP/HTTP endpoint that counts what it is sent and answers 200. */
async function startTraceSink() {
  const received = { exports: 0, bytes: 0 };
  const server = http.createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (received.bytes += chunk.length));
    req.on('end', () => {
      received.exports++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, close: () => new Promise((r) => server.close(r)) };
}

/** Tracing off (the measured data plane) against on, in interleaved rounds (see the header). */
async function tracingCost(split: Awaited<ReturnType<typeof startSplit>>, off: ChildProcess, urls: ServerUrls, scenarios: Scenario[]) {
  console.log('');
  if (!split) {
    console.log('tracing cost: measured on the production profile only (DATABASE_URL and REDIS_URL set, BENCH_SPLIT not 0)');
    return;
  }
  if (scenarios.length === 0) return;
  const ratio = process.env.BENCH_TRACING_RATIO ?? '0.01';
  const sink = await startTraceSink();
  const on = await split.startDataPlane({ OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_TRACES_SAMPLER_ARG: ratio });
  try {
    const tracedOf = (s: Scenario): Scenario => ({ ...s, url: s.url.replace(urls.data, on.urls.data) });
    // The traced data plane loaded its snapshots at start; wait until it answers like the other.
    for (const s of scenarios) {
      for (let i = 0; i < 200; i++) {
        const res = await fetch(tracedOf(s).url, { method: 'POST', headers: s.headers, body: s.body });
        await res.text();
        if (res.ok) break;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const runs = new Map(scenarios.map((s) => [s.name, { off: [] as Peak[], on: [] as Peak[] }]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const s of scenarios) {
        const order = round % 2 === 1 ? (['off', 'on'] as const) : (['on', 'off'] as const);
        for (const which of order) {
          const peak = which === 'off' ? await peakRun(off, s) : await peakRun(on.child, tracedOf(s));
          runs.get(s.name)![which].push(peak);
          console.log(`  tracing round ${round}/${ROUNDS} ${s.name} ${which}: ${fmt(peak.rps)} req/s, server CPU ${fmt(peak.cpu * 100)}%`);
        }
      }
    }
    console.log('');
    // Requests per second of server CPU as well: robust to other processes taking the core.
    const perCpu = (p: Peak) => p.rps / Math.max(p.cpu, 0.01);
    console.log(`| route | tracing off req/s | tracing on (${Number(ratio) * 100}% sampled) req/s | on / off (median of rounds) | rounds | off req per CPU-s | on req per CPU-s | on / off per CPU-s (median of rounds) |`);
    console.log('|---|---:|---:|---:|---|---:|---:|---:|');
    for (const s of scenarios) {
      const r = runs.get(s.name)!;
      const ratios = r.on.map((p, i) => p.rps / r.off[i].rps);
      const cpuRatios = r.on.map((p, i) => perCpu(p) / perCpu(r.off[i]));
      console.log(
        `| ${s.name} | ${fmt(median(r.off.map((p) => p.rps)))} | ${fmt(median(r.on.map((p) => p.rps)))} | ${fmt(median(ratios) * 100)}% (bar >= 85%) | ${ratios.map((x) => fmt(x, 2)).join(', ')} | ` +
          `${fmt(median(r.off.map(perCpu)))} | ${fmt(median(r.on.map(perCpu)))} | ${fmt(median(cpuRatios) * 100)}% |`,
      );
    }
    console.log(`spans exported by the traced data plane: ${sink.received.exports} OTLP requests, ${fmt(sink.received.bytes / 1024)} KB`);
  } finally {
    await stopServer(on.child);
    await sink.close();
  }
}

/**
 * With Postgres and Redis servers (the production profile), the measured process is what
 * production runs for evaluation: a data-plane process alone (ROLES=data, no Temporal client,
 * no control-plane routes), pinned to its core with the bare routes beside it. Setup goes
 * through a separate control-plane process on the same database and key prefix, as the
 * deployment in docker-compose.yml has it, and evaluation events go to a ClickHouse in another
 * process (bench/memory-clickhouse.ts). BENCH_SPLIT=0, or the embedded profile, runs one
 * process with both roles instead.
 */
async function startSplit(pinned: boolean) {
  const admin = process.env.DATABASE_URL;
  if (!admin || !process.env.REDIS_URL || process.env.BENCH_SPLIT === '0') return undefined;
  const database = `bench_${process.pid}`;
  const sql = postgres(admin, { max: 1, onnotice: () => undefined });
  await sql.unsafe(`CREATE DATABASE ${database}`);
  const url = new URL(admin);
  url.pathname = `/${database}`;
  // ClickHouse elsewhere, as deployed: the chDB shim in a process of its own (on CPU 1, inherited).
  const shim = startScript('clickhouse-shim', 'memory-clickhouse.ts', { ...process.env, CH_SHIM_PATH: '' });
  const common = { BENCH_DATABASE_URL: url.toString(), BENCH_SHARED_ID: String(process.pid), CLICKHOUSE_URL: await reportedUrl(shim) };
  const control = await startServer(false, { ...common, BENCH_SERVER_ROLES: 'control' }, false);
  // After the control plane: its migrations and demo seed are done when the data plane loads.
  const data = await startServer(pinned, { ...common, BENCH_SERVER_ROLES: 'data', BENCH_DEMO_SEED: 'false' });
  return {
    child: data.child,
    urls: { ...data.urls, control: control.urls.control },
    /** Another data plane on the same database and key prefix, e.g. with tracing on. */
    startDataPlane: (env: Record<string, string>) => startServer(pinned, { ...common, BENCH_SERVER_ROLES: 'data', BENCH_DEMO_SEED: 'false', ...env }),
    async stop() {
      await stopServer(control.child);
      await shim.stop();
      await sql.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
      await sql.end();
    },
  };
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
