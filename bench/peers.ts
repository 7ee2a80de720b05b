/**
 * `npm run bench:peers`: our data plane side by side with the fastest peers, like with like, same
 * machine, same run. Every server runs alone on CPU 0 (taskset); autocannon, and whatever the
 * server needs that would run elsewhere in production, run on CPU 1. 50 connections,
 * BENCH_DURATION (8) seconds after BENCH_WARMUP (5) of the same load, BENCH_ROUNDS (3) interleaved rounds.
 *
 * Ours, two lines per comparison:
 *   data plane     the production profile: `ROLES=data` of the built app (dist/api/main.js,
 *                  NODE_ENV=production) on CPU 0, with Postgres and Redis of
 *                  scripts/test-infra.sh (a fresh database, dropped at the end), ClickHouse as
 *                  bench/memory-clickhouse.ts (chDB) in another process, and a control plane
 *                  (`ROLES=control,worker`, the set-up's API) on CPU 1 with the load generator:
 *                  evaluation events leave the process as they would for a ClickHouse elsewhere.
 *                  Needs `source scripts/test-infra.sh up` first.
 *   embedded       the embedded profile (bench/eval-server.ts: what `npm start` runs with no
 *                  backend URL, every role, plus two bare routes) as one process on CPU 0 with
 *                  its Temporal dev server, evaluation events written to its in-process chDB
 *                  unless BENCH_EVENTS=off.
 *
 * Each server's cost: user + system CPU time of the server process and its descendants, read from
 * /proc/<pid>/stat before and after every measured run, per 10,000 requests answered. A slower or
 * busier host raises every server's figure alike, so the headline is the ratio of CPU per request
 * (the peer's divided by ours, above 1 when ours is cheaper), the median over rounds; requests
 * per second and their ratio are shown too.
 *
 *   OFREP single   one boolean flag with a 10% rollout, one context
 *                  ours: POST /api/ofrep/v1/evaluate/flags/{key}
 *                  flagd: POST /ofrep/v1/evaluate/flags/{key} (GOMAXPROCS=1)
 *   all 5 flags    the five flags of a service (10% rollouts each) for one context
 *                  ours: POST /api/ofrep/v1/evaluate/flags (OFREP bulk: every flag)
 *                  Unleash Edge: GET /api/frontend/all?userId=... (every toggle, like ours), and
 *                  GET /api/frontend?userId=... (only the toggles enabled for the context,
 *                  usually none at 10%: the smaller answer Unleash's web SDK asks for)
 *                  Edge runs offline on one tokio worker thread.
 *   bulk-users     the same, each request for the next of 100,000 users: no two requests in a
 *                  flush window alike, so ours records a row per flag of each (worst case of
 *                  the recorder's folding, api/features/evaluation/recorder.ts)
 *   floor          the runtime's own floor, measured in the same rounds: a bare node:http route
 *                  on our servers' node (bench/bare-http.ts) answering the all-flags request
 *                  with our data plane's answer to it as a constant, and our headers. How far a run's figures
 *                  are from a quiet host's shows in it: every server's cost moves with it.
 *
 * The peers are built from their public sources for the measurement only and never committed;
 * point at the binaries with FLAGD_BIN and UNLEASH_EDGE_BIN (docs/data-plane.md#benchmarks says how
 * to build them). A peer whose binary is not given is left out of the table. BENCH_ONLY=single,
 * bulk, bulk-enabled, bulk-users or floor runs those comparisons. BENCH_SERVER_NODE_ARGS (e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof`) goes to the node of both our servers (npm run
 * bench:profile summarizes such profiles by part of the request). BENCH_SERVER_NODE (a node
 * binary) runs both our servers on it instead of the bench's own node: the production image's
 * major, say, when the machine has another.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { listenerUrl, productionBackends, productionEnv, startApp, treeCpuSeconds, type Child } from './memory-procs';
import { call, createProject, createReadToken, createService, signUp } from './memory-setup';
import { fmt, median, pinSelf } from './report';
import { SERVER_NODE, serverNodeVersion, startEvalServer, stopServer } from './server-process';

const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const FLAGD_BIN = process.env.FLAGD_BIN;
const serverNodeArgs = process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean);
const UNLEASH_EDGE_BIN = process.env.UNLEASH_EDGE_BIN;
const FLAGD_OFREP_PORT = 18016;
const EDGE_PORT = 13063;
const EDGE_TOKEN = '*:production.benchsecret';
const TARGETING_KEY = 'user-1234';
const BULK_KEYS = ['bulk-0', 'bulk-1', 'bulk-2', 'bulk-3', 'bulk-4'];
/** bulk-users: each request is for the next of this many users, round robin. */
const USERS = 100_000;
/** The load test's setting (docs/data-plane.md#benchmarks): rate limits far above the load. */
const RAISED_LIMIT = String(1_000_000_000);
/** The embedded profile's roles: all of them, ROLES' default. */
const EMBEDDED_ROLES = 'control,data,ingest,worker';

interface Target {
  name: string;
  /** The server process whose CPU time (with its descendants') is read around each run. */
  pid: number;
  request: { url: string; method: 'GET' | 'POST'; headers: Record<string, string>; body?: string };
  /** The request for the n-th user of USERS, when each request is another user's. */
  forUser?: (n: number) => { path?: string; body?: string };
  /** A helper that production runs on another machine (here on CPU 1): its CPU is shown, not counted. */
  offCore?: { name: string; pid: number };
}

interface Comparison {
  /** What BENCH_ONLY names it by. */
  name: 'single' | 'bulk' | 'bulk-enabled' | 'bulk-users' | 'floor';
  request: string;
  peer: Target | undefined;
  /** Our data plane (production profile), then the embedded profile; the floor's bare route. */
  ours: Target[];
}

interface Run {
  rps: number;
  requests: number;
  /** Server CPU seconds (process and descendants) over the run. */
  cpu: number;
  errors: number;
}

/** Server CPU-seconds per 10,000 requests answered. */
const cpuPer10k = (r: Run) => (r.cpu / Math.max(r.requests, 1)) * 10_000;

/** Starts a peer binary on CPU 0 and waits until `readyUrl` answers. */
async function startPeer(bin: string, args: string[], env: Record<string, string>, readyUrl: string, readyInit?: RequestInit): Promise<ChildProcess> {
  const child = spawn('taskset', ['-c', '0', bin, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-2000);
  });
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`${path.basename(bin)} exited with ${child.exitCode}: ${stderr}`);
    try {
      const res = await fetch(readyUrl, readyInit);
      if (res.ok) return child;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`${path.basename(bin)} did not become ready: ${stderr}`);
}

/** bench/bare-http.ts on CPU 0 (when pinned), on our servers' node: the runtime's floor. */
async function startFloor(pinned: boolean, answer: string): Promise<{ child: ChildProcess; port: number }> {
  const script = [SERVER_NODE, '--import', 'tsx', path.join(__dirname, 'bare-http.ts')];
  const [command, ...args] = pinned ? ['taskset', '-c', '0', ...script] : script;
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, BARE_HTTP_ANSWER: answer } });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bare-http exited with ${code}`)));
    child.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
  });
  return { child, port };
}

function stopPeer(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
  });
}

/** flagd's flag file: the same rollouts as ours (fractional on the targeting key). */
function flagdConfig(): string {
  const rollout = { state: 'ENABLED', variants: { on: true, off: false }, defaultVariant: 'off', targeting: { fractional: [['on', 10], ['off', 90]] } };
  const flags: Record<string, unknown> = { 'bench-single': rollout };
  for (const key of BULK_KEYS) flags[key] = rollout;
  return JSON.stringify({ flags });
}

/** Unleash Edge's offline bootstrap: five features with a 10% gradual rollout on the user id. */
function edgeFeatures(): string {
  return JSON.stringify({
    version: 2,
    features: BULK_KEYS.map((name) => ({
      name,
      type: 'release',
      enabled: true,
      project: 'default',
      strategies: [{ name: 'flexibleRollout', parameters: { rollout: '10', stickiness: 'default', groupId: name } }],
    })),
  });
}

/**
 * Our two services (one flag; the five bulk flags) created through the control plane, as
 * targets on the data listener; waits until the data plane's snapshots hold them.
 */
async function setUpOurs(name: string, pid: number, urls: { control: string; data: string }): Promise<{ single: Target; bulk: Target; bulkUsers: Target }> {
  const session = await signUp(urls.control);
  const projectId = await createProject(session, 'Peers');
  const singleService = await createService(session, projectId, 'single');
  const bulkService = await createService(session, projectId, 'bulk');
  const rollout = (key: string, serviceId: string) => ({
    key,
    serviceId,
    environment: 'production',
    type: 'boolean',
    enabled: true,
    defaultValue: false,
    targeting: [{ conditions: [], value: true, rolloutPercentage: 10 }],
  });
  await call('POST', `${urls.control}/api/flags`, { session, body: rollout('bench-single', singleService) });
  for (const key of BULK_KEYS) await call('POST', `${urls.control}/api/flags`, { session, body: rollout(key, bulkService) });
  const token = await createReadToken(session, projectId);
  const auth = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  const body = JSON.stringify({ context: { targetingKey: TARGETING_KEY } });
  const single: Target = {
    name,
    pid,
    request: { url: `${urls.data}/api/ofrep/v1/evaluate/flags/bench-single`, method: 'POST', headers: { ...auth, 'x-service-id': singleService, 'x-environment': 'production' }, body },
  };
  const bulk: Target = {
    name,
    pid,
    request: { url: `${urls.data}/api/ofrep/v1/evaluate/flags`, method: 'POST', headers: { ...auth, 'x-service-id': bulkService, 'x-environment': 'production' }, body },
  };
  // The flags reach the data plane's snapshots over the bus: wait until both services answer with every flag.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const singleAnswer = await fetch(single.request.url, { method: 'POST', headers: single.request.headers, body });
    const bulkAnswer = (await (await fetch(bulk.request.url, { method: 'POST', headers: bulk.request.headers, body })).json()) as { flags?: unknown[] };
    await singleAnswer.body?.cancel();
    if (singleAnswer.ok && bulkAnswer.flags?.length === BULK_KEYS.length) break;
    if (Date.now() > deadline) throw new Error(`${name}: the flags did not reach the data plane within 60 s (single ${singleAnswer.status}, bulk ${JSON.stringify(bulkAnswer).slice(0, 200)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const bulkUsers: Target = { ...bulk, forUser: (n) => ({ body: JSON.stringify({ context: { targetingKey: `user-${n}` } }) }) };
  return { single, bulk, bulkUsers };
}

/**
 * BENCH_WARMUP seconds of the same load, then the measured run, with the server's CPU time read
 * from /proc around it. Five by default: a server idle while the others' rounds ran may have had
 * its young generation shrunk by V8's memory reducer (to 1 MB), and under load it took about
 * 700 MB of allocation (3-4 s here) in scavenges of 2 to 32 MB, promoting what they should not,
 * to grow back to 64 MB; a run that began meanwhile read ours up to half again as costly.
 */
async function peak(target: Target): Promise<Run> {
  let n = 0;
  const { forUser } = target;
  const perUser = forUser && { requests: [{ setupRequest: (req: object) => ({ ...req, ...forUser(n++ % USERS) }) }] };
  const opts = { ...target.request, ...perUser, connections: CONNECTIONS };
  await autocannon({ ...opts, duration: WARMUP });
  const before = treeCpuSeconds(target.pid);
  const result = await autocannon({ ...opts, duration: DURATION });
  const cpu = treeCpuSeconds(target.pid) - before;
  return { rps: result.requests.average, requests: result.requests.total, cpu, errors: result.errors + result.non2xx };
}

/** The lowest and highest of the rounds. */
const span = (xs: number[], digits = 0) => `${fmt(Math.min(...xs), digits)}-${fmt(Math.max(...xs), digits)}`;

async function main() {
  const pinned = pinSelf(1);
  if (!pinned) console.log('taskset is missing: servers and load generator share the CPUs');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-peers-'));
  // Started last, stopped first: the data plane, the control plane, then the ClickHouse shim.
  const children: Child[] = [];
  const track = (child: Child) => {
    children.unshift(child);
    return child;
  };
  const cleanups: (() => Promise<void>)[] = [];
  let flagd: ChildProcess | undefined;
  let edge: ChildProcess | undefined;
  let embedded: Awaited<ReturnType<typeof startEvalServer>> | undefined;
  let floor: ChildProcess | undefined;
  try {
    // Ours on the production profile: the control plane and ClickHouse (CPU 1, inherited from
    // this process), the data plane alone on CPU 0.
    const { backends, shim } = await productionBackends('bench-peers', path.join(dir, 'clickhouse'), { track, cleanup: (fn) => void cleanups.push(fn) });
    const env = (roles: string, name: string) =>
      productionEnv(backends, roles, mkdtempSync(path.join(dir, `${name}-`)), { RATE_LIMIT_PER_IP: RAISED_LIMIT, RATE_LIMIT_PER_TOKEN: RAISED_LIMIT, RATE_LIMIT_PER_SERVICE: RAISED_LIMIT });
    const control = track(startApp('control', env('control,worker', 'control')));
    const api = await listenerUrl(control, 'control', 120_000);
    const dataPlane = track(startApp('data-plane', env('data', 'data'), { cpus: pinned ? '0' : undefined, nodeArgs: serverNodeArgs }));
    const dataUrl = await listenerUrl(dataPlane, 'data', 60_000);
    const production = await setUpOurs('ours, data plane', dataPlane.pid, { control: api, data: dataUrl });
    production.single.offCore = production.bulk.offCore = production.bulkUsers.offCore = { name: 'ClickHouse shim', pid: shim.pid };

    // Ours embedded: no backend URL, so PGlite, the in-process cache, chDB and the Temporal dev
    // server; every role, as `npm start` runs it, so with the node flags scripts/run-api.sh gives
    // those roles.
    embedded = await startEvalServer({
      pinned,
      nodeArgs: serverNodeArgs,
      env: { DATABASE_URL: undefined, REDIS_URL: undefined, TEMPORAL_ADDRESS: undefined, CLICKHOUSE_URL: undefined, BENCH_SERVER_ROLES: EMBEDDED_ROLES },
    });
    const embeddedTargets = await setUpOurs('ours, embedded', embedded.child.pid!, embedded.urls);

    let flagdTarget: Target | undefined;
    if (FLAGD_BIN) {
      writeFileSync(path.join(dir, 'flags.json'), flagdConfig());
      flagd = await startPeer(
        FLAGD_BIN,
        ['start', '--uri', `file:${path.join(dir, 'flags.json')}`, '--port', '18013', '--ofrep-port', String(FLAGD_OFREP_PORT), '--management-port', '18014', '--sync-port', '18015'],
        { GOMAXPROCS: '1' },
        `http://127.0.0.1:${FLAGD_OFREP_PORT}/ofrep/v1/evaluate/flags/bench-single`,
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ context: { targetingKey: TARGETING_KEY } }) },
      );
      flagdTarget = {
        name: 'flagd (GOMAXPROCS=1)',
        pid: flagd.pid!,
        request: {
          url: `http://127.0.0.1:${FLAGD_OFREP_PORT}/ofrep/v1/evaluate/flags/bench-single`,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ context: { targetingKey: TARGETING_KEY } }),
        },
      };
    }
    let edgeTarget: Target | undefined;
    let edgeEnabledTarget: Target | undefined;
    let edgeUsersTarget: Target | undefined;
    if (UNLEASH_EDGE_BIN) {
      writeFileSync(path.join(dir, 'features.json'), edgeFeatures());
      const url = `http://127.0.0.1:${EDGE_PORT}/api/frontend?userId=${TARGETING_KEY}`;
      edge = await startPeer(
        UNLEASH_EDGE_BIN,
        ['--port', String(EDGE_PORT), '--interface', '127.0.0.1', 'offline', '--bootstrap-file', path.join(dir, 'features.json'), '--frontend-tokens', EDGE_TOKEN, '--client-tokens', EDGE_TOKEN],
        { RUST_LOG: 'warn', TOKIO_WORKER_THREADS: '1' },
        url,
        { headers: { authorization: EDGE_TOKEN } },
      );
      edgeTarget = { name: 'Unleash Edge /api/frontend/all (1 worker)', pid: edge.pid!, request: { url: url.replace('/api/frontend?', '/api/frontend/all?'), method: 'GET', headers: { authorization: EDGE_TOKEN } } };
      edgeEnabledTarget = { name: 'Unleash Edge /api/frontend (1 worker)', pid: edge.pid!, request: { url, method: 'GET', headers: { authorization: EDGE_TOKEN } } };
      edgeUsersTarget = { ...edgeTarget, forUser: (n) => ({ path: `/api/frontend/all?userId=user-${n}` }) };
    }
    // The floor answers with our data plane's own all-flags answer, byte for byte.
    const { url, method, headers, body } = production.bulk.request;
    const bare = await startFloor(pinned, await (await fetch(url, { method, headers, body })).text());
    floor = bare.child;
    const nodeVersion = serverNodeVersion();
    const floorTarget: Target = {
      name: `bare node:http (node ${nodeVersion})`,
      pid: bare.child.pid!,
      request: { ...production.bulk.request, url: `http://127.0.0.1:${bare.port}/api/ofrep/v1/evaluate/flags` },
    };
    const all: Comparison[] = [
      { name: 'single', request: 'one boolean flag, 10% rollout, OFREP single', peer: flagdTarget, ours: [production.single, embeddedTargets.single] },
      { name: 'bulk', request: `all ${BULK_KEYS.length} flags of a service for one context`, peer: edgeTarget, ours: [production.bulk, embeddedTargets.bulk] },
      { name: 'bulk-enabled', request: `all ${BULK_KEYS.length} flags, the peer listing only those enabled for the context`, peer: edgeEnabledTarget, ours: [production.bulk, embeddedTargets.bulk] },
      { name: 'bulk-users', request: `all ${BULK_KEYS.length} flags, each request another of ${fmt(USERS)} users`, peer: edgeUsersTarget, ours: [production.bulkUsers, embeddedTargets.bulkUsers] },
      { name: 'floor', request: 'the floor: the all-flags request answered by a bare node:http route, a constant answer', peer: undefined, ours: [floorTarget] },
    ];
    const comparisons = all.filter((c) => !ONLY || ONLY.includes(c.name));
    console.log(
      `bench:peers  ${DURATION}s per run after ${WARMUP}s of warm-up, ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds, ` +
        `servers ${pinned ? 'each alone on CPU 0, autocannon on CPU 1' : 'unpinned'}; server CPU = user + system time of the server process and its descendants from /proc, per 10,000 requests answered`,
    );
    console.log(
      `  ours, data plane: ROLES=data of dist/api/main.js, production profile (NODE_ENV=production, Postgres + Redis of scripts/test-infra.sh, ` +
        `evaluation events to ClickHouse over HTTP: the chDB shim in another process${pinned ? ' on CPU 1' : ''}, as a ClickHouse elsewhere; control plane ROLES=control,worker${pinned ? ' on CPU 1' : ''})`,
    );
    console.log(
      `  ours, embedded: the embedded profile in one process with its Temporal dev server (ROLES=${EMBEDDED_ROLES}, PGlite, in-process cache, evaluation events ${process.env.BENCH_EVENTS === 'off' ? 'dropped' : 'written to the in-process chDB'})`,
    );
    console.log(`  ours on node ${nodeVersion}${process.env.BENCH_SERVER_NODE ? ` (BENCH_SERVER_NODE=${process.env.BENCH_SERVER_NODE})` : ''}`);
    console.log('  flagd: GOMAXPROCS=1, flags from a file; Unleash Edge: offline, bootstrap file, TOKIO_WORKER_THREADS=1');
    // The answers differ in size (Unleash's frontend API lists only the toggles enabled for the
    // context, so with 10% rollouts usually none): print each, so the table is read knowingly.
    for (const c of comparisons) {
      for (const target of [c.peer, ...c.ours]) {
        if (target === undefined) continue;
        const answer = await (await fetch(target.request.url, { method: target.request.method, headers: target.request.headers, body: target.request.body })).text();
        console.log(`  ${c.name}, ${target.name} answers ${answer.length} bytes: ${answer.slice(0, 160)}${answer.length > 160 ? '...' : ''}`);
      }
    }
    // Keyed by comparison and server: one of our targets may serve in two comparisons.
    const runs = new Map<string, Run[]>();
    const offCore = new Map<string, number[]>();
    const runKey = (c: Comparison, target: Target) => `${c.name}:${target.name}`;
    for (let round = 1; round <= ROUNDS; round++) {
      for (const c of comparisons) {
        for (const target of [c.peer, ...c.ours]) {
          if (target === undefined) continue;
          const helperBefore = target.offCore && treeCpuSeconds(target.offCore.pid);
          const result = await peak(target);
          const key = runKey(c, target);
          runs.set(key, [...(runs.get(key) ?? []), result]);
          let helper = '';
          if (target.offCore && helperBefore !== undefined) {
            const per10k = ((treeCpuSeconds(target.offCore.pid) - helperBefore) / Math.max(result.requests, 1)) * 10_000;
            offCore.set(key, [...(offCore.get(key) ?? []), per10k]);
            helper = `; ${target.offCore.name} ${fmt(per10k, 3)} CPU-s/10k (not counted)`;
          }
          console.log(`  round ${round}/${ROUNDS} ${c.request}, ${target.name}: ${fmt(result.rps)} req/s, ${fmt(cpuPer10k(result), 3)} server CPU-s per 10k requests${helper}`);
        }
      }
    }
    console.log('');
    console.log('| request | server | req/s (rounds) | server CPU-s per 10k req (median) | peer CPU per request / ours (median of rounds) | ours / peer req/s (median of rounds) | errors |');
    console.log('|---|---|---|---:|---:|---:|---:|');
    for (const c of comparisons) {
      const theirs = c.peer && runs.get(runKey(c, c.peer));
      const rows: string[] = [];
      if (c.peer && theirs) {
        const errors = theirs.reduce((n, r) => n + r.errors, 0);
        rows.push(`| ${c.request} | ${c.peer.name} | ${span(theirs.map((r) => r.rps))} | ${fmt(median(theirs.map(cpuPer10k)), 3)} | | | ${errors} |`);
      }
      for (const target of c.ours) {
        const mine = runs.get(runKey(c, target))!;
        const cpuRatio = theirs ? `**${fmt(median(mine.map((m, i) => cpuPer10k(theirs[i]) / cpuPer10k(m))), 2)}x**` : '-';
        const rpsRatio = theirs ? `${fmt(median(mine.map((m, i) => m.rps / theirs[i].rps)), 2)}x` : '-';
        const errors = mine.reduce((n, r) => n + r.errors, 0);
        rows.push(`| ${c.peer ? '' : c.request} | ${target.name} | ${span(mine.map((r) => r.rps))} | ${fmt(median(mine.map(cpuPer10k)), 3)} | ${cpuRatio} | ${rpsRatio} | ${errors} |`);
      }
      for (const line of rows) console.log(line);
    }
    const floorComparison = comparisons.find((c) => c.name === 'floor');
    const floorRuns = floorComparison && runs.get(runKey(floorComparison, floorTarget));
    if (floorRuns) {
      const floorCost = median(floorRuns.map(cpuPer10k));
      const multiples = comparisons
        .filter((c) => c !== floorComparison)
        .flatMap((c) => c.ours.map((target) => `${c.name} ${target.name.replace('ours, ', '')} ${fmt(median(runs.get(runKey(c, target))!.map(cpuPer10k)) / floorCost, 2)}x`));
      console.log('');
      console.log(`The floor read ${fmt(floorCost, 3)} CPU-s per 10k requests in this run${multiples.length ? `; ours as multiples of it: ${multiples.join(', ')}` : ''}.`);
    }
    if (offCore.size) {
      const figures = [...offCore].map(([key, xs]) => `${key.split(':')[0]} ${fmt(median(xs), 3)}`);
      console.log('');
      console.log(
        `Not counted for ours, data plane: the ClickHouse shim it sends evaluation events to (another process${pinned ? ', on CPU 1' : ''}; in production a ClickHouse elsewhere), ` +
          `CPU-s per 10k of its requests (median): ${figures.join(', ')}.`,
      );
    }
  } finally {
    await Promise.all([stopPeer(flagd), stopPeer(edge), stopPeer(floor), embedded && stopServer(embedded.child)]);
    for (const child of children) await child.stop().catch(() => child.killGroup());
    for (const cleanup of cleanups.reverse()) await cleanup().catch((error) => console.error(`clean-up step failed: ${(error as Error).message}`));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
