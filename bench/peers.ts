/**
 * `npm run bench:peers`: our data plane side by side with the fastest peers, same machine, same
 * run. Each server runs alone on CPU 0 (taskset), autocannon on CPU 1, 50 connections, BENCH_DURATION
 * (8) seconds, BENCH_ROUNDS (3) interleaved rounds; the table gives the median ratio of rounds.
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
 *
 * Ours is the embedded profile (bench/eval-server.ts, what `npm start` runs plus two bare routes),
 * evaluation events recorded into the in-process chDB unless BENCH_EVENTS=off.
 *
 * The peers are built from their public sources for the measurement only and never committed;
 * point at the binaries with FLAGD_BIN and UNLEASH_EDGE_BIN (docs/data-plane.md#benchmarks says how
 * to build them). A peer whose binary is not given is left out of the table. BENCH_ONLY=single,
 * bulk, bulk-enabled or bulk-users runs those comparisons. BENCH_SERVER_NODE_ARGS (e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof`) goes to our server's node.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { call, signUp, startEvalServer, stopServer } from './server-process';
import { fmt, median, pinSelf } from './report';

const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const FLAGD_BIN = process.env.FLAGD_BIN;
const UNLEASH_EDGE_BIN = process.env.UNLEASH_EDGE_BIN;
const FLAGD_OFREP_PORT = 18016;
const EDGE_PORT = 13063;
const EDGE_TOKEN = '*:production.benchsecret';
const TARGETING_KEY = 'user-1234';
const BULK_KEYS = ['bulk-0', 'bulk-1', 'bulk-2', 'bulk-3', 'bulk-4'];
/** bulk-users: each request is for the next of this many users, round robin. */
const USERS = 100_000;

interface Target {
  name: string;
  request: { url: string; method: 'GET' | 'POST'; headers: Record<string, string>; body?: string };
  /** The request for the n-th user of USERS, when each request is another user's. */
  forUser?: (n: number) => { path?: string; body?: string };
}

interface Comparison {
  /** What BENCH_ONLY names it by. */
  name: 'single' | 'bulk' | 'bulk-enabled' | 'bulk-users';
  request: string;
  peer: Target | undefined;
  ours: Target;
}


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

async function setUpOurs(urls: { control: string; data: string }) {
  const api = urls.control;
  const as = await signUp(api);
  const project = (await call('POST', `${api}/api/projects`, { ...as, body: { name: 'Peers' } })).body;
  const single = (await call('POST', `${api}/api/services`, { ...as, body: { projectId: project.id, name: 'single' } })).body;
  const bulk = (await call('POST', `${api}/api/services`, { ...as, body: { projectId: project.id, name: 'bulk' } })).body;
  const rollout = (key: string, serviceId: string) => ({
    key,
    serviceId,
    environment: 'production',
    type: 'boolean',
    enabled: true,
    defaultValue: false,
    targeting: [{ conditions: [], value: true, rolloutPercentage: 10 }],
  });
  await call('POST', `${api}/api/flags`, { ...as, body: rollout('bench-single', single.id) });
  for (const key of BULK_KEYS) await call('POST', `${api}/api/flags`, { ...as, body: rollout(key, bulk.id) });
  const token = (await call('POST', `${api}/api/projects/${project.id}/tokens`, { ...as, body: { name: 'peers', permissions: { read: true } } })).body.value as string;
  const auth = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  const body = JSON.stringify({ context: { targetingKey: TARGETING_KEY } });
  const singleTarget: Target = {
    name: 'ours',
    request: { url: `${urls.data}/api/ofrep/v1/evaluate/flags/bench-single`, method: 'POST', headers: { ...auth, 'x-service-id': single.id, 'x-environment': 'production' }, body },
  };
  const bulkTarget: Target = {
    name: 'ours',
    request: { url: `${urls.data}/api/ofrep/v1/evaluate/flags`, method: 'POST', headers: { ...auth, 'x-service-id': bulk.id, 'x-environment': 'production' }, body },
  };
  // The flags reach the data plane's snapshots over the bus: wait until the bulk answer has all five.
  for (let i = 0; i < 200; i++) {
    const res = await fetch(bulkTarget.request.url, { method: 'POST', headers: bulkTarget.request.headers, body });
    const answer = (await res.json()) as { flags?: unknown[] };
    if (answer.flags?.length === BULK_KEYS.length) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  const bulkUsersTarget: Target = { ...bulkTarget, forUser: (n) => ({ body: JSON.stringify({ context: { targetingKey: `user-${n}` } }) }) };
  return { singleTarget, bulkTarget, bulkUsersTarget };
}

async function peak(target: Target): Promise<{ rps: number; errors: number }> {
  let n = 0;
  const { forUser } = target;
  const perUser = forUser && { requests: [{ setupRequest: (req: object) => ({ ...req, ...forUser(n++ % USERS) }) }] };
  const opts = { ...target.request, ...perUser, connections: CONNECTIONS };
  await autocannon({ ...opts, duration: 1 });
  const result = await autocannon({ ...opts, duration: DURATION });
  return { rps: result.requests.average, errors: result.errors + result.non2xx };
}


async function main() {
  const pinned = pinSelf(1);
  if (!pinned) console.log('taskset is missing: servers and load generator share the CPUs');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-peers-'));
  let flagd: ChildProcess | undefined;
  let edge: ChildProcess | undefined;
  const ours = await startEvalServer({ pinned, nodeArgs: process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) });
  try {
    const { singleTarget, bulkTarget, bulkUsersTarget } = await setUpOurs(ours.urls);
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
        name: 'flagd',
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
      edgeTarget = { name: 'Unleash Edge /api/frontend/all', request: { url: url.replace('/api/frontend?', '/api/frontend/all?'), method: 'GET', headers: { authorization: EDGE_TOKEN } } };
      edgeEnabledTarget = { name: 'Unleash Edge /api/frontend', request: { url, method: 'GET', headers: { authorization: EDGE_TOKEN } } };
      edgeUsersTarget = { ...edgeTarget, forUser: (n) => ({ path: `/api/frontend/all?userId=user-${n}` }) };
    }
    const all: Comparison[] = [
      { name: 'single', request: 'one boolean flag, 10% rollout, OFREP single', peer: flagdTarget, ours: singleTarget },
      { name: 'bulk', request: `all ${BULK_KEYS.length} flags of a service for one context`, peer: edgeTarget, ours: bulkTarget },
      { name: 'bulk-enabled', request: `all ${BULK_KEYS.length} flags, the peer listing only those enabled for the context`, peer: edgeEnabledTarget, ours: bulkTarget },
      { name: 'bulk-users', request: `all ${BULK_KEYS.length} flags, each request another of ${fmt(USERS)} users`, peer: edgeUsersTarget, ours: bulkUsersTarget },
    ];
    const comparisons = all.filter((c) => !ONLY || ONLY.includes(c.name));
    console.log(
      `bench:peers  ${DURATION}s per run, ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds, ` +
        `servers ${pinned ? 'on CPU 0, autocannon on CPU 1' : 'unpinned'}, our evaluation events ${process.env.BENCH_EVENTS === 'off' ? 'dropped' : 'written to chDB'}`,
    );
    // The answers differ in size (Unleash's frontend API lists only the toggles enabled for the
    // context, so with 10% rollouts usually none): print each, so the table is read knowingly.
    for (const c of comparisons) {
      for (const target of [c.peer, c.ours]) {
        if (target === undefined) continue;
        const answer = await (await fetch(target.request.url, { method: target.request.method, headers: target.request.headers, body: target.request.body })).text();
        console.log(`  ${c.name}, ${target.name} answers ${answer.length} bytes: ${answer.slice(0, 160)}${answer.length > 160 ? '...' : ''}`);
      }
    }
    // Keyed by comparison and side: one of our targets may serve in two comparisons.
    const runs = new Map<string, { rps: number; errors: number }[]>();
    const runKey = (c: Comparison, side: 'peer' | 'ours') => `${c.name}:${side}`;
    for (let round = 1; round <= ROUNDS; round++) {
      for (const c of comparisons) {
        for (const side of ['peer', 'ours'] as const) {
          const target = c[side];
          if (target === undefined) continue;
          const result = await peak(target);
          runs.set(runKey(c, side), [...(runs.get(runKey(c, side)) ?? []), result]);
          console.log(`  round ${round}/${ROUNDS} ${c.request}, ${target.name}: ${fmt(result.rps)} req/s`);
        }
      }
    }
    console.log('');
    console.log('| request | peer | peer req/s | ours req/s | ours/peer (median of rounds) | errors |');
    console.log('|---|---|---|---|---:|---:|');
    for (const c of comparisons) {
      const mine = runs.get(runKey(c, 'ours'))!;
      const theirs = runs.get(runKey(c, 'peer'));
      const span = (xs: { rps: number }[]) => `${fmt(Math.min(...xs.map((x) => x.rps)))}-${fmt(Math.max(...xs.map((x) => x.rps)))}`;
      const ratio = theirs ? fmt(median(mine.map((m, i) => m.rps / theirs[i].rps)), 2) : '-';
      const errors = [...mine, ...(theirs ?? [])].reduce((n, r) => n + r.errors, 0);
      console.log(`| ${c.request} | ${c.peer?.name ?? '(not given)'} | ${theirs ? span(theirs) : '-'} | ${span(mine)} | ${ratio} | ${errors} |`);
    }
  } finally {
    await Promise.all([stopPeer(flagd), stopPeer(edge), stopServer(ours.child)]);
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
