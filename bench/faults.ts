/**
 * `npm run bench:faults`: the production profile survives its backends going away.
 *
 * Starts its own Postgres (initdb + pg_ctl, Debian's postgresql), Redis (redis-server), Temporal
 * dev server (TEMPORAL_CLI_PATH, SQLite file) and ClickHouse endpoint (bench/memory-clickhouse.ts,
 * chDB in its own process, reached through a TCP proxy), and two app instances running every role
 * (control, worker, data, ingest) as `npm start` does (dist/api/main.js). Under a steady mixed load
 * (bench/fault-matrix.ts), Postgres, Redis and Temporal are each stopped for FAULT_OUTAGE_SECONDS
 * (30) and started again, and ClickHouse is made unreachable as long. Prints per fault what the
 * outage cost beside the bars of docs/quality-bars.md.
 *
 *   npm run bench:faults                       # 30 s outages
 *   FAULT_OUTAGE_SECONDS=5 npm run bench:faults
 *   FAULTS=postgres,redis npm run bench:faults # a subset, in that order
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ANY_FREE_PORTS } from '../api/config';
import { freePort } from '../api/infra/temporal';
import { startTcpProxy } from '../test/support/tcp-proxy';
import { meetsBars, RECOVERY_BOUND_MS, runFaultMatrix, WRITE_ANSWER_BOUND_MS, type BackendName, type FaultResult, type FaultTarget } from './fault-matrix';
import { listenerUrl, startApp, startScript, type Child } from './memory-procs';
import { fmt } from './report';

const OUTAGE_SECONDS = Number(process.env.FAULT_OUTAGE_SECONDS ?? 30);
const FAULTS = (process.env.FAULTS ?? 'postgres,redis,temporal,clickhouse').split(',').map((f) => f.trim()) as BackendName[];
const log = (line: string) => console.error(`[bench:faults] ${line}`);
const cleanups: (() => Promise<void> | void)[] = [];
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-bench-faults-'));

function pgBin(): string {
  const versions = fs.readdirSync('/usr/lib/postgresql').sort((a, b) => Number(a) - Number(b));
  if (!versions.length) throw new Error('PostgreSQL binaries not found under /usr/lib/postgresql (Debian postgresql)');
  return `/usr/lib/postgresql/${versions[versions.length - 1]}/bin`;
}

/** Runs a PostgreSQL tool as the postgres user when we are root (initdb refuses root). */
function asPostgres(tool: string, args: string[]) {
  const cmd = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', path.join(pgBin(), tool), ...args]] : [path.join(pgBin(), tool), args];
  const run = spawnSync(cmd[0] as string, cmd[1] as string[], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`${tool} ${args.join(' ')}: ${run.stderr || run.stdout}`);
}

async function ownPostgres(): Promise<{ url: string; target: FaultTarget }> {
  const dir = path.join(root, 'pg');
  fs.mkdirSync(dir);
  if (process.getuid?.() === 0) spawnSync('chown', ['-R', 'postgres:postgres', root]);
  asPostgres('initdb', ['-D', dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
  const port = await freePort();
  const options = `-p ${port} -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`;
  const start = async () => asPostgres('pg_ctl', ['-D', dir, '-l', path.join(dir, 'server.log'), '-w', '-o', options, 'start']);
  const stop = async () => asPostgres('pg_ctl', ['-D', dir, '-m', 'fast', '-w', 'stop']);
  await start();
  cleanups.push(() => asPostgres('pg_ctl', ['-D', dir, '-m', 'immediate', 'stop']));
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, target: { name: 'postgres', how: 'stopped (pg_ctl stop -m fast, then start)', stop, start } };
}

/** A server child process that can be stopped and started again on the same port. */
function restartable(name: string, spawnIt: () => ChildProcess, ready: () => Promise<void>): { start(): Promise<void>; stop(): Promise<void> } {
  let child: ChildProcess | undefined;
  const stop = async () => {
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGTERM');
    const killed = setTimeout(() => child?.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killed);
  };
  cleanups.push(stop);
  return {
    async start() {
      child = spawnIt();
      child.once('exit', (code, signal) => code && log(`${name} exited with ${code ?? signal}`));
      await ready();
    },
    stop,
  };
}

async function waitForPort(port: number, what: string) {
  const net = await import('node:net');
  for (let i = 0; i < 300; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (open) return;
    await sleep(200);
  }
  throw new Error(`${what} did not open port ${port}`);
}

async function ownRedis(): Promise<{ url: string; target: FaultTarget }> {
  const port = await freePort();
  const server = restartable(
    'redis',
    () => spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' }),
    () => waitForPort(port, 'redis-server'),
  );
  await server.start();
  return { url: `redis://127.0.0.1:${port}`, target: { name: 'redis', how: 'stopped (SIGTERM, then started empty)', ...server } };
}

async function ownTemporal(): Promise<{ address: string; target: FaultTarget }> {
  const port = await freePort();
  const cli = process.env.TEMPORAL_CLI_PATH ?? 'temporal';
  const db = path.join(root, 'temporal.sqlite');
  const server = restartable(
    'temporal',
    () => spawn(cli, ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--headless', '--db-filename', db, '--log-level', 'error'], { stdio: 'ignore' }),
    () => waitForPort(port, 'temporal dev server'),
  );
  await server.start();
  return { address: `127.0.0.1:${port}`, target: { name: 'temporal', how: 'stopped (SIGTERM, then started on the same SQLite file)', ...server } };
}

async function ownClickHouse(): Promise<{ url: string; target: FaultTarget }> {
  const shim = startScript('clickhouse-shim', 'memory-clickhouse.ts', { ...process.env, CH_SHIM_PATH: path.join(root, 'clickhouse') });
  cleanups.push(() => shim.stop());
  const url = await new Promise<string>((resolve, reject) => {
    shim.proc.on('message', (m: { type?: string; url?: string }) => m?.type === 'ready' && m.url && resolve(m.url));
    shim.proc.once('exit', (code) => reject(shim.failure(`exited with ${code}`)));
  });
  const u = new URL(url);
  const proxy = await startTcpProxy({ host: u.hostname, port: Number(u.port) });
  cleanups.push(() => proxy.close());
  return {
    url: `http://${proxy.address}`,
    target: { name: 'clickhouse', how: 'unreachable (connections hang, no answer)', stop: async () => proxy.blackhole(), start: async () => proxy.restore() },
  };
}

function report(results: FaultResult[]) {
  const rows = results.map((r) => {
    const evalRate = r.evaluations.total ? (100 * r.evaluations.ok) / r.evaluations.total : 0;
    return [
      `${r.fault} (${r.how}, ${fmt(r.outageSeconds, 1)} s)`,
      `  evaluations during the outage  ${fmt(r.evaluations.ok)} / ${fmt(r.evaluations.total)} = ${fmt(evalRate, 2)} %   (bar 100 %)`,
      `  writes                         ${fmt(r.writes.total)}: ${fmt(r.writes.acknowledged)} acknowledged, ${fmt(r.writes.refused)} refused; slowest answer ${fmt(r.writes.slowest)} ms, ${r.writes.overBound} over ${WRITE_ANSWER_BOUND_MS / 1000} s, ${r.writes.hanging} hanging   (bar: 0 over, 0 hanging)`,
      `  track events                   ${fmt(r.track.total)}: ${fmt(r.track.accepted)} accepted, ${fmt(r.track.refused)} refused`,
      `  acknowledged writes lost       ${r.acknowledgedLost}   (bar 0)`,
      `  events lost                    SSE ${r.eventsLost.sse}, flagd sync ${r.eventsLost.flagdSync}, webhooks ${r.eventsLost.webhook}   (bar 0)`,
      `  all changes delivered after    ${r.deliveredSeconds === null ? 'not within the wait' : `${fmt(r.deliveredSeconds, 1)} s`}`,
      `  time to recover                ${r.recoverSeconds === null ? 'did not recover' : `${fmt(r.recoverSeconds, 1)} s`}   (bar ${RECOVERY_BOUND_MS / 1000} s)`,
      `  ${meetsBars(r) ? 'meets every bar' : 'MISSES A BAR'}`,
    ];
  });
  console.log(rows.flat().join('\n'));
}

async function main() {
  log(`own backends under ${root}; outages of ${OUTAGE_SECONDS} s: ${FAULTS.join(', ')}`);
  const [pg, redis, temporal, clickhouse] = [await ownPostgres(), await ownRedis(), await ownTemporal(), await ownClickHouse()];
  log(`postgres ${pg.url}, redis ${redis.url}, temporal ${temporal.address}, clickhouse ${clickhouse.url}`);

  const jwtKey = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const appEnv = (name: string): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH,
    NODE_ENV: 'production',
    ROLES: 'control,worker,data,ingest',
    HOST: '127.0.0.1',
    // Two instances on one host: every listener on a port the system picks.
    ...ANY_FREE_PORTS,
    DATA_DIR: path.join(root, name),
    DATABASE_URL: pg.url,
    REDIS_URL: redis.url,
    CLICKHOUSE_URL: clickhouse.url,
    TEMPORAL_ADDRESS: temporal.address,
    JWT_PRIVATE_KEY: jwtKey,
    // Webhooks go to the bench's receiver on 127.0.0.1.
    ALLOW_PRIVATE_WEBHOOK_TARGETS: 'on',
    RATE_LIMIT_PER_IP: '1000000',
    RATE_LIMIT_PER_TOKEN: '1000000',
    RATE_LIMIT_PER_SERVICE: '1000000',
    // The listeners' addresses are read from the info-level "listening" lines.
    LOG_LEVEL: 'info',
  });
  const apps: Child[] = [];
  for (const name of ['app-a', 'app-b']) {
    // The first start runs the migrations; the second waits for it.
    const app = startApp(name, appEnv(name));
    cleanups.push(() => app.stop());
    apps.push(app);
    await listenerUrl(app, 'control', 120_000);
  }
  const urls = await Promise.all(
    apps.map(async (app) => ({ control: await listenerUrl(app, 'control', 60_000), data: await listenerUrl(app, 'data', 60_000), flagdSync: await listenerUrl(app, 'flagd-sync', 60_000) })),
  );
  log(`two app instances (every role): ${urls.map((u) => `${u.control} + ${u.data} + ${u.flagdSync}`).join('; ')}`);

  const targets: Record<BackendName, FaultTarget> = { postgres: pg.target, redis: redis.target, temporal: temporal.target, clickhouse: clickhouse.target };
  const results = await runFaultMatrix({
    apps: urls,
    faults: FAULTS.map((f) => targets[f]),
    outageMs: OUTAGE_SECONDS * 1000,
    evaluationLoops: 2,
    writeLoops: 2,
    writePauseMs: 250,
    deliveryWaitMs: 180_000,
    log,
  });
  report(results);
  if (!results.every(meetsBars)) process.exitCode = 1;
}

async function cleanUp() {
  for (const cleanup of cleanups.splice(0).reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
  fs.rmSync(root, { recursive: true, force: true });
}

// Interrupted: the servers and apps started here go too.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void cleanUp().finally(() => process.exit(130));
  });
}

main()
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(cleanUp);
