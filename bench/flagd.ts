/**
 * `npm run bench:flagd`: our flagd protocols at scale, against the bars of
 * docs/quality-bars.md#propagation-and-streams and docs/quality-bars.md#against-peers.
 *
 *   propagation    BENCH_SYNC_STREAMS (1,000) SyncFlags streams open on our FLAGD_SYNC_PORT, plus
 *                  the published JS flagd provider in in-process mode; BENCH_TOGGLES (50) toggles
 *                  of a flag through the API, one at a time: the time from sending the toggle to
 *                  the provider serving the new value (p50, p99; bar: p99 under 1 s)
 *   stream memory  the server's RSS and heap before and after opening those streams (after a GC)
 *   payload        the sync document of BENCH_PAYLOAD_FLAGS (10,000) flags of every kind:
 *                  toFlagdDocument + JSON.stringify, its size and build time (median of 5)
 *   RPC throughput flagd.evaluation.v2 ResolveBoolean, one boolean flag with a 10% rollout, over
 *                  gRPC on FLAGD_PORT: ours beside flagd itself (FLAGD_BIN, GOMAXPROCS=1), each
 *                  server alone on CPU 0, the same load generator on CPU 1 (ghz, GHZ_BIN: `go
 *                  install github.com/bojand/ghz/cmd/ghz@v0.121.0`), BENCH_DURATION (8) seconds,
 *                  BENCH_ROUNDS (3) interleaved rounds. Compared as server CPU time per request
 *                  (from /proc, every thread of the server process), so a load generator that
 *                  cannot saturate the faster server does not hide the difference; requests per
 *                  second are printed beside it. Bar: ours at least 1.5x flagd. Beside them,
 *                  the floor: a bare node:http2 route answering one constant response
 *                  (bench/bare-grpc.ts). Left out when FLAGD_BIN or GHZ_BIN is not given.
 *
 * BENCH_SERVER_NODE_ARGS (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`) goes to our server's node.
 *
 * Ours is bench/eval-server.ts on the embedded profile, control and data roles (a toggle needs
 * no worker), its flagd listeners on ports of their own; like `npm start`, it needs the Temporal
 * CLI (on the PATH, or TEMPORAL_CLI_PATH as scripts/test-infra.sh exports it).
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { FlagdProvider } from '@openfeature/flagd-provider';
import { OpenFeature, ProviderEvents } from '@openfeature/server-sdk';
import { toFlagdDocument, type TranslatableFlag } from '../api/features/flagd/translate';
import { FlagSyncService } from '../api/gen/flagd/sync/v1/sync_pb';
import { ask, call, signUp, startEvalServer, stopServer, type ServerUrls } from './server-process';
import { fmt, median, pinSelf } from './report';

const SYNC_STREAMS = Number(process.env.BENCH_SYNC_STREAMS ?? 1_000);
const TOGGLES = Number(process.env.BENCH_TOGGLES ?? 50);
const PAYLOAD_FLAGS = Number(process.env.BENCH_PAYLOAD_FLAGS ?? 10_000);
const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const FLAGD_BIN = process.env.FLAGD_BIN;
const GHZ_BIN = process.env.GHZ_BIN;
/** Streams per HTTP/2 connection: a provider process holds one; spread them like many processes. */
const STREAMS_PER_CONNECTION = 100;
const FLAGD_PORTS = { rpc: 18113, mgmt: 18114, sync: 18115, ofrep: 18116 };
const TARGETING_KEY = 'user-1234';
const BARS = { propagationP99Ms: 1_000, rpcRatio: 1.5 };

interface Memory {
  usage: NodeJS.MemoryUsage;
}

/**
 * The server's memory once quiet: after a second, the median of three samples each taken after a
 * GC (the embedded profile's other threads, chDB and PGlite, move RSS on their own).
 */
async function settledMemory(child: ChildProcess): Promise<{ heap: number; rss: number }> {
  await new Promise((r) => setTimeout(r, 1_000));
  const samples: Memory[] = [];
  for (let i = 0; i < 3; i++) {
    samples.push(await ask<Memory>(child, { type: 'memory', gc: true }, 'memory'));
    await new Promise((r) => setTimeout(r, 500));
  }
  return { heap: median(samples.map((m) => m.usage.heapUsed + m.usage.external)), rss: median(samples.map((m) => m.usage.rss)) };
}

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
const ms = (n: number) => `${n.toFixed(0)} ms`;
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];


/** 10,000 flags of every kind the translation handles: static, rules, rollouts, weighted variants. */
function payloadFlags(n: number): TranslatableFlag[] {
  const flags: TranslatableFlag[] = [];
  for (let i = 0; i < n; i++) {
    const key = `flag-${i}`;
    const kind = i % 4;
    if (kind === 0) flags.push({ key, type: 'boolean', enabled: i % 8 === 0, defaultValue: false, variants: [], targeting: [], version: 1 });
    else if (kind === 1)
      flags.push({
        key,
        type: 'string',
        enabled: true,
        defaultValue: 'off',
        variants: [],
        targeting: [
          { id: `r${i}a`, conditions: [{ property: 'country', operator: 'in', value: ['FR', 'DE', 'ES'] }, { property: 'plan', operator: 'equals', value: 'pro' }], value: 'on' },
          { id: `r${i}b`, conditions: [{ property: 'email', operator: 'ends_with', value: '@example.com' }], value: 'staff', rolloutPercentage: 25 },
        ],
        version: 3,
      });
    else if (kind === 2)
      flags.push({ key, type: 'boolean', enabled: true, defaultValue: false, variants: [], targeting: [{ id: `r${i}`, conditions: [], value: true, rolloutPercentage: 10 }], version: 2 });
    else
      flags.push({
        key,
        type: 'object',
        enabled: true,
        defaultValue: { color: 'grey' },
        variants: [
          { name: 'blue', value: { color: 'blue' }, weight: 50 },
          { name: 'green', value: { color: 'green' }, weight: 30 },
          { name: 'red', value: { color: 'red' }, weight: 20 },
        ],
        targeting: [{ id: `r${i}`, conditions: [{ property: 'age', operator: 'gt', value: 30 }], value: { color: 'gold' } }],
        version: 5,
      });
  }
  return flags;
}

function payload() {
  const flags = payloadFlags(PAYLOAD_FLAGS);
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    const json = JSON.stringify(toFlagdDocument(flags, new Map()));
    times.push(performance.now() - t0);
    bytes = Buffer.byteLength(json);
  }
  return { bytes, buildMs: median(times) };
}

interface OurSetUp {
  api: string;
  as: { cookie: string; csrf: string };
  serviceId: string;
  token: string;
}

/** A project with one service, its 10% rollout flag, a flag to toggle, and a bound read token. */
async function setUpOurs(urls: ServerUrls): Promise<OurSetUp> {
  const api = urls.control;
  const as = await signUp(api);
  const project = (await call('POST', `${api}/api/projects`, { ...as, body: { name: 'flagd bench' } })).body;
  const service = (await call('POST', `${api}/api/services`, { ...as, body: { projectId: project.id, name: 'flagd' } })).body;
  const flag = (key: string, targeting: unknown[]) => ({ key, serviceId: service.id, environment: 'production', type: 'boolean', enabled: true, defaultValue: false, targeting });
  await call('POST', `${api}/api/flags`, { ...as, body: flag('bench-single', [{ conditions: [], value: true, rolloutPercentage: 10 }]) });
  // Served true by its rule while enabled, its default false while disabled: each toggle flips it.
  await call('POST', `${api}/api/flags`, { ...as, body: flag('bench-toggle', [{ conditions: [], value: true }]) });
  const token = (
    await call('POST', `${api}/api/projects/${project.id}/tokens`, {
      ...as,
      body: { name: 'flagd bench', permissions: { read: true }, scope: { serviceId: service.id, environment: 'production' } },
    })
  ).body.value as string;
  return { api, as, serviceId: service.id, token };
}

/** Opens `n` SyncFlags streams with the bound token, resolved when each has its first document. */
async function openSyncStreams(syncUrl: string, token: string, n: number) {
  const clients: Client<typeof FlagSyncService>[] = [];
  for (let i = 0; i < Math.ceil(n / STREAMS_PER_CONNECTION); i++) clients.push(createClient(FlagSyncService, createGrpcTransport({ baseUrl: syncUrl })));
  const abort = new AbortController();
  // One signal ends every stream: each stream listens to it.
  setMaxListeners(n + 10, abort.signal);
  const firsts: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    const client = clients[Math.floor(i / STREAMS_PER_CONNECTION)];
    firsts.push(
      new Promise<void>((resolve, reject) => {
        (async () => {
          let first = true;
          for await (const message of client.syncFlags({ selector: token }, { signal: abort.signal })) {
            if (first && message.flagConfiguration) {
              first = false;
              resolve();
            }
          }
        })().catch((error: unknown) => (abort.signal.aborted ? resolve() : reject(error as Error)));
      }),
    );
  }
  await Promise.all(firsts);
  return { close: () => abort.abort() };
}

/** The JS provider in in-process mode; resolves when it is ready. */
async function inProcessProvider(syncPort: number, token: string) {
  const provider = new FlagdProvider({ resolverType: 'in-process', host: '127.0.0.1', port: syncPort, selector: token });
  await OpenFeature.setProviderAndWait('bench', provider);
  return OpenFeature.getClient('bench');
}

async function propagation(setUp: OurSetUp, syncPort: number) {
  const client = await inProcessProvider(syncPort, setUp.token);
  const lags: number[] = [];
  let value = await client.getBooleanValue('bench-toggle', false);
  for (let i = 0; i < TOGGLES; i++) {
    const expected = !value;
    const served = new Promise<void>((resolve) => {
      const check = async () => {
        if ((await client.getBooleanValue('bench-toggle', !expected)) === expected) {
          client.removeHandler(ProviderEvents.ConfigurationChanged, check);
          resolve();
        }
      };
      client.addHandler(ProviderEvents.ConfigurationChanged, check);
    });
    const t0 = performance.now();
    await call('POST', `${setUp.api}/api/flags/bench-toggle/toggle?serviceId=${setUp.serviceId}&environment=production`, setUp.as);
    await served;
    lags.push(performance.now() - t0);
    value = expected;
  }
  await OpenFeature.clearProviders();
  return lags.sort((a, b) => a - b);
}

/** Starts flagd on CPU 0 (one OS thread for Go code) with the same 10% rollout flag as ours. */
async function startFlagd(bin: string): Promise<ChildProcess> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-flagd-'));
  const rollout = { state: 'ENABLED', variants: { on: true, off: false }, defaultVariant: 'off', targeting: { fractional: [['on', 10], ['off', 90]] } };
  writeFileSync(path.join(dir, 'flags.json'), JSON.stringify({ flags: { 'bench-single': rollout } }));
  const args = ['start', '--uri', `file:${path.join(dir, 'flags.json')}`, '--port', String(FLAGD_PORTS.rpc), '--sync-port', String(FLAGD_PORTS.sync)];
  args.push('--ofrep-port', String(FLAGD_PORTS.ofrep), '--management-port', String(FLAGD_PORTS.mgmt));
  const child = spawn('taskset', ['-c', '0', bin, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, GOMAXPROCS: '1' } });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-2000);
  });
  const url = `http://127.0.0.1:${FLAGD_PORTS.ofrep}/ofrep/v1/evaluate/flags/bench-single`;
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`flagd exited with ${child.exitCode}: ${stderr}`);
    const ok = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"context":{"targetingKey":"x"}}' }).then(
      (res) => res.ok,
      () => false,
    );
    if (ok) return child;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`flagd did not become ready: ${stderr}`);
}

/** bench/bare-grpc.ts on CPU 0: the least a gRPC unary answer costs in Node. */
function startBareGrpc(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn('taskset', ['-c', '0', process.execPath, '--import', 'tsx', path.join(__dirname, 'bare-grpc.ts')], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bare gRPC server exited with ${code}`)));
    child.stdout!.once('data', (chunk: Buffer) => resolve({ child, port: Number(chunk.toString().trim()) }));
  });
}

function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
  });
}

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

/** CPU seconds (user + system, every thread) a process has used, from /proc/<pid>/stat. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

interface Run {
  rps: number;
  /** Server CPU microseconds per request. */
  cpuUs: number;
  errors: number;
}

/** ghz on CPU 1 against a flagd.evaluation.v2 server: requests per second, the server's CPU per request, errors. */
async function ghz(server: ChildProcess, port: number, selector: string | undefined, seconds: number): Promise<Run> {
  const args = ['-c', '1', GHZ_BIN!, '--insecure', '--cpus', '1', '--format', 'json', '--import-paths', path.join(__dirname, '../proto')];
  args.push('--proto', path.join(__dirname, '../proto/flagd/evaluation/v2/evaluation.proto'), '--call', 'flagd.evaluation.v2.Service/ResolveBoolean');
  args.push('-d', JSON.stringify({ flag_key: 'bench-single', context: { targetingKey: TARGETING_KEY } }), '-c', '50', '--connections', '4', '-z', `${seconds}s`);
  if (selector) args.push('--metadata', JSON.stringify({ 'flagd-selector': selector }));
  const cpuBefore = cpuSeconds(server.pid!);
  const { stdout } = await promisify(execFile)('taskset', [...args, `127.0.0.1:${port}`], { maxBuffer: 64 * 1024 * 1024 });
  const cpu = cpuSeconds(server.pid!) - cpuBefore;
  const report = JSON.parse(stdout) as { count: number; rps: number; statusCodeDistribution?: Record<string, number>; errorDistribution?: Record<string, number> };
  // ghz closes its connections at the deadline: the calls then in flight fail on its side only.
  const failures = Object.entries(report.errorDistribution ?? {}).filter(([message]) => !message.includes('use of closed network connection'));
  const errors = failures.reduce((n, [, count]) => n + count, 0);
  if (errors > 0) console.log(`  errors on port ${port}: ${JSON.stringify(failures).slice(0, 300)}`);
  const ok = report.statusCodeDistribution?.OK ?? 0;
  return { rps: ok / seconds, cpuUs: (cpu / ok) * 1e6, errors };
}

async function main() {
  const started = Date.now();
  const pinned = pinSelf(1);
  if (!pinned) console.log('taskset is missing: servers and clients share the CPUs');
  // The embedded profile, whatever the shell has set (the child inherits this environment).
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'TEMPORAL_ADDRESS', 'CLICKHOUSE_URL', 'BENCH_DATABASE_URL']) delete process.env[name];

  const built = payload();
  console.log(`payload: ${fmt(PAYLOAD_FLAGS)} flags -> ${fmt(built.bytes / 1024)} KB of JSON, built in ${built.buildMs.toFixed(1)} ms (toFlagdDocument + JSON.stringify, median of 5)`);

  const ours = await startEvalServer({
    pinned,
    nodeArgs: ['--expose-gc', ...(process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [])],
    env: {
      BENCH_SERVER_ROLES: 'control,data',
      BENCH_DEMO_SEED: 'false',
      STREAM_MAX_PER_IP: String(SYNC_STREAMS * 2),
      STREAM_MAX_PER_CREDENTIAL: String(SYNC_STREAMS * 2),
      STREAM_MAX_PER_SERVICE: String(SYNC_STREAMS * 2),
    },
  });
  let flagd: ChildProcess | undefined;
  let bare: { child: ChildProcess; port: number } | undefined;
  try {
    const { flagd: rpcUrl, flagdSync: syncUrl } = ours.urls;
    if (!rpcUrl || !syncUrl) throw new Error('the bench server did not report its flagd listeners');
    const syncPort = Number(new URL(syncUrl).port);
    const setUp = await setUpOurs(ours.urls);

    const before = await settledMemory(ours.child);
    const t0 = performance.now();
    const streams = await openSyncStreams(syncUrl, setUp.token, SYNC_STREAMS);
    const openMs = performance.now() - t0;
    const after = await settledMemory(ours.child);
    const perStream = (n: number) => `${fmt(n / SYNC_STREAMS / 1024, 1)} KB`;
    const heapDelta = after.heap - before.heap;
    const rssDelta = after.rss - before.rss;
    console.log(`sync streams: ${fmt(SYNC_STREAMS)} opened in ${(openMs / 1000).toFixed(1)} s (each with its first document)`);
    console.log(
      `  server heap+external ${mb(before.heap)} -> ${mb(after.heap)} (${perStream(heapDelta)} per stream), ` +
        `RSS ${mb(before.rss)} -> ${mb(after.rss)} (${perStream(rssDelta)} per stream; chDB's and PGlite's threads move it too)`,
    );

    const lags = await propagation(setUp, syncPort);
    streams.close();
    console.log(`propagation with ${fmt(SYNC_STREAMS)} sync streams open: ${TOGGLES} toggles, p50 ${ms(percentile(lags, 50))}, p99 ${ms(percentile(lags, 99))}, max ${ms(lags[lags.length - 1])}`);

    const throughput: { ours: Run[]; flagd: Run[]; bare: Run[] } = { ours: [], flagd: [], bare: [] };
    if (FLAGD_BIN && GHZ_BIN) {
      flagd = await startFlagd(FLAGD_BIN);
      bare = await startBareGrpc();
      const oursPort = Number(new URL(rpcUrl).port);
      // Warm every server up (JIT, connection set-up) before the rounds.
      await ghz(flagd, FLAGD_PORTS.rpc, undefined, 1);
      await ghz(ours.child, oursPort, setUp.token, 1);
      await ghz(bare.child, bare.port, undefined, 1);
      for (let round = 1; round <= ROUNDS; round++) {
        const theirs = await ghz(flagd, FLAGD_PORTS.rpc, undefined, DURATION);
        const mine = await ghz(ours.child, oursPort, setUp.token, DURATION);
        const floor = await ghz(bare.child, bare.port, undefined, DURATION);
        throughput.flagd.push(theirs);
        throughput.ours.push(mine);
        throughput.bare.push(floor);
        const line = (r: Run) => `${fmt(r.rps)} req/s, ${fmt(r.cpuUs, 1)} us CPU/request`;
        console.log(`  round ${round}/${ROUNDS} ResolveBoolean: flagd ${line(theirs)}; ours ${line(mine)}; bare node:http2 ${line(floor)}`);
      }
    } else {
      console.log('RPC throughput left out: set FLAGD_BIN and GHZ_BIN (docs/data-plane.md#benchmarks)');
    }

    const p99 = percentile(lags, 99);
    // Per round, flagd's CPU per request over ours: how many of our requests one of flagd's costs.
    const ratio = throughput.ours.length ? median(throughput.ours.map((r, i) => throughput.flagd[i].cpuUs / r.cpuUs)) : undefined;
    const rpsRatio = throughput.ours.length ? median(throughput.ours.map((r, i) => r.rps / throughput.flagd[i].rps)) : undefined;
    const span = (runs: Run[]) => `${fmt(Math.min(...runs.map((r) => r.rps)))}-${fmt(Math.max(...runs.map((r) => r.rps)))} req/s, ${fmt(median(runs.map((r) => r.cpuUs)), 1)} us CPU/req`;
    const errors = [...throughput.ours, ...throughput.flagd].reduce((n, r) => n + r.errors, 0);
    console.log('');
    console.log('| measure | ours | baseline | bar | met |');
    console.log('|---|---|---|---|---|');
    console.log(`| toggle -> in-process provider serves it, ${fmt(SYNC_STREAMS)} streams open | p50 ${ms(percentile(lags, 50))}, p99 ${ms(p99)} | - | p99 < ${ms(BARS.propagationP99Ms)} | ${p99 < BARS.propagationP99Ms ? 'yes' : 'NO'} |`);
    console.log(`| server memory per open sync stream | heap+external ${perStream(heapDelta)}, RSS ${perStream(rssDelta)} | - | - | - |`);
    console.log(`| sync document of ${fmt(PAYLOAD_FLAGS)} flags | ${fmt(built.bytes / 1024)} KB, ${built.buildMs.toFixed(1)} ms | - | - | - |`);
    if (ratio !== undefined)
      console.log(
        `| RPC ResolveBoolean, one core each: flagd's CPU per request / ours (median of ${ROUNDS}; req/s ratio ${fmt(rpsRatio!, 2)}) | ${span(throughput.ours)} | flagd ${span(throughput.flagd)} | >= ${BARS.rpcRatio}x | ${fmt(ratio, 2)}x ${ratio >= BARS.rpcRatio ? 'yes' : 'NO'} (${errors} errors) |`,
      );
    if (throughput.bare.length)
      console.log(`| the floor: a bare node:http2 route answering one constant ResolveBooleanResponse | ${span(throughput.bare)} | - | - | - |`);
    console.log(`\n(total run ${Math.round((Date.now() - started) / 1000)} s)`);
  } finally {
    await Promise.all([stopChild(flagd), stopChild(bare?.child), stopServer(ours.child)]);
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
