/**
 * `npm run bench:memory`: the three memory bars of docs/quality-bars.md, each measured on
 * the real built app (`node dist/api/main.js`, as `npm start` and the Docker image run it), one
 * process per role so every RSS is its own:
 *
 *   1. The data-plane process on the production profile (ROLES=data; DATABASE_URL, REDIS_URL
 *      and CLICKHOUSE_URL set) idles under 150 MB RSS with the snapshots of a modest project
 *      loaded (one service, 100 flags).
 *   2. The same process holding 10,000 more flags in its snapshots stays under 150 MB RSS too. The
 *      flags are created through POST /api/flags/bulk of a separate control-plane process
 *      (ROLES=control,worker, same Postgres/Redis/Temporal) and reach the data plane over the
 *      flag-change bus, as in production; the bench waits until /api/health/evaluation counts
 *      them and evaluates some of them with a project token.
 *   3. The whole embedded profile (every role, no backend URL: PGlite, in-process cache, chDB,
 *      the Temporal dev server the app starts) idles under 800 MB RSS, the app process and the
 *      Temporal dev server (its child) counted together, and under 1% of a core, the CPU time
 *      of both counted. Measured on one DATA_DIR at the first start (PGlite runs initdb), at a
 *      restart (what `npm start` on ./data is every time after the first), and on that restart
 *      again after a few minutes of light mixed use (BENCH_USE_MS) and a pause: memory a
 *      process keeps after use (caches, buffers, fragmentation) counts.
 *
 * Idle CPU: user + system time from /proc/<pid>/stat of the process and every descendant, over
 * BENCH_IDLE_CPU_MS (60 s) of no traffic that start BENCH_IDLE_SETTLE_MS (30 s) after the memory
 * reading, as a share of one core. The
 * data plane's is read with 10,000 flags held (bar 2); its bar is memory only.
 *
 * RSS is VmRSS from /proc/<pid>/status, read after the process settled (BENCH_SETTLE_MS, 5 s),
 * then a full GC (the app runs with --expose-gc; an IPC preload calls gc()) and 3 s more. The
 * figure before that GC is shown too, and heapUsed / external from process.memoryUsage(), and
 * where the RSS lies by mapping (/proc/<pid>/smaps: anonymous memory, malloc's heap, libchdb.so,
 * the node binary ...).
 *
 * Bars 1-2 need the production backends: `source scripts/test-infra.sh up` first (Postgres,
 * Redis, Temporal). A fresh database bench_mem_<pid> is created and dropped, Redis keys live
 * under bench-mem:<pid>: and are deleted, the Temporal task queue is bench-mem-<pid>. ClickHouse
 * is bench/memory-clickhouse.ts, a ClickHouse HTTP interface backed by chDB in its own process
 * (there is no ClickHouse server here; see that file).
 *
 * Runs `npm run build` first (BENCH_BUILD=0 skips it). Environment: BENCH_FLAGS (10,000),
 * BENCH_SETTLE_MS (5,000), BENCH_IDLE_CPU_MS (60,000), BENCH_IDLE_SETTLE_MS (30,000), BENCH_USE_MS (180,000), BENCH_VERBOSE=1
 * (children's output on stderr), BENCH_TIMEOUT_MS (900,000). Every child process (and what it started) and every temporary directory is removed
 * at the end, also on failure or Ctrl-C.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { ANY_FREE_PORTS } from '../api/config';
import { appEnv, type Child, cpuSeconds, descendants, listenerUrl, procMemory, productionBackends, productionEnv, ROOT, sleep, startApp, type MemorySample, type ProcMemory } from './memory-procs';
import { bulkCreate, createProject, createReadToken, createService, evaluate, evaluationHealth, lightUse, signUp, type LightUse } from './memory-setup';

const MB = 1024 * 1024;
const LIMIT_DATA_IDLE = 150 * MB;
const LIMIT_DATA_FLAGS = 150 * MB;
const LIMIT_EMBEDDED = 800 * MB;
/** Of one core. */
const LIMIT_EMBEDDED_CPU = 0.01;
const IDLE_CPU_MS = Number(process.env.BENCH_IDLE_CPU_MS ?? 60_000);
/** After the memory reading and before the CPU window: what start or use set off (merges, checkpoints, GC) ends first. */
const IDLE_SETTLE_MS = Number(process.env.BENCH_IDLE_SETTLE_MS ?? 30_000);
const USE_MS = Number(process.env.BENCH_USE_MS ?? 180_000);
const USE_FLAGS = 200;
const MODEST_FLAGS = 100;
const SEED_FLAGS = Number(process.env.BENCH_FLAGS ?? 10_000);
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 5_000);
const AFTER_GC_MS = 3_000;
const TIMEOUT_MS = Number(process.env.BENCH_TIMEOUT_MS ?? 900_000);
const BULK_PARALLEL = 4;

const startedAt = performance.now();
const log = (message: string) => console.error(`[bench:memory ${((performance.now() - startedAt) / 1000).toFixed(1).padStart(5)} s] ${message}`);
const mb = (bytes: number) => `${(bytes / MB).toFixed(1)} MB`;
const pct = (share: number) => `${(share * 100).toFixed(2)}%`;

// ---------------------------------------------------------------------------------------------
// Clean-up: every child and temporary directory is registered here the moment it exists.

const children = new Set<Child>();
const tempDirs = new Set<string>();
const cleanups: (() => Promise<void>)[] = [];

function tempDir(name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `flags-bench-memory-${name}-`));
  tempDirs.add(dir);
  return dir;
}

/** Set on Ctrl-C or the watchdog: nothing new is started, everything started is stopped. */
let aborting = false;

function track(child: Child): Child {
  children.add(child);
  if (aborting) {
    child.killGroup();
    throw new Error('aborted');
  }
  return child;
}

function abort(reason: string, code: number) {
  if (aborting) return;
  aborting = true;
  log(`${reason}: cleaning up`);
  void cleanUp().finally(() => process.exit(code));
}

async function stopChild(child: Child | undefined) {
  if (!child) return;
  await child.stop();
  children.delete(child);
}

let cleaningUp: Promise<void> | undefined;
function cleanUp(): Promise<void> {
  cleaningUp ??= (async () => {
    await Promise.all([...children].map((c) => stopChild(c).catch(() => c.killGroup())));
    for (const fn of cleanups.splice(0).reverse()) await fn().catch((error) => log(`clean-up step failed: ${(error as Error).message}`));
    for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
    tempDirs.clear();
  })();
  return cleaningUp;
}

// Last resort when the process exits some other way: no child or directory is left behind.
process.on('exit', () => {
  for (const c of children) c.killGroup();
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => abort(signal, 130));

// ---------------------------------------------------------------------------------------------

interface Measured {
  before: MemorySample;
  after: MemorySample;
}

/** Let the process settle, read it, full GC, wait, read it again. */
async function measure(child: Child): Promise<Measured> {
  await sleep(SETTLE_MS);
  const before = await child.memory(false);
  await child.memory(true);
  await sleep(AFTER_GC_MS);
  const after = await child.memory(false);
  return { before, after };
}

interface IdleCpu {
  /** Share of one core, the process and its descendants together. */
  share: number;
  /** RSS at the end of the idle window, the process and its descendants together: what it holds while idling. */
  rss: number;
  processes: { pid: number; name: string; share: number; rss: number }[];
}

/** CPU time of the process and every descendant over `ms` (no traffic meanwhile), as a share of one core. */
async function idleCpu(pid: number, ms: number): Promise<IdleCpu> {
  await sleep(IDLE_SETTLE_MS);
  const procs = [{ pid, name: 'app' }, ...descendants(pid)];
  const started = performance.now();
  const before = procs.map((p) => cpuSeconds(p.pid) ?? 0);
  await sleep(ms);
  const wall = (performance.now() - started) / 1000;
  const processes = procs.map((p, i) => ({ ...p, share: ((cpuSeconds(p.pid) ?? before[i]) - before[i]) / wall, rss: procMemory(p.pid)?.rss ?? 0 }));
  return { share: processes.reduce((sum, p) => sum + p.share, 0), rss: processes.reduce((sum, p) => sum + p.rss, 0), processes };
}

async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await sleep(250);
  }
}

async function healthy(base: string, timeoutMs: number) {
  await waitFor(`${base}/api/health`, timeoutMs, async () => ((await fetch(`${base}/api/health`)).status === 200 ? true : undefined));
}

interface ProductionResult {
  idle: Measured;
  flags: Measured;
  flagsCpu: IdleCpu;
  flagsHeld: number;
  servicesHeld: number;
  seedSeconds: number;
  propagationSeconds: number;
  eventsWritten: number;
  /** The data plane's snapshot counters when it first held every flag. */
  snapshotEvents: { applied: number; ignored: number };
  shim?: ProcMemory;
  control?: ProcMemory;
}

async function runProduction(): Promise<ProductionResult> {
  // Postgres, Redis and Temporal of scripts/test-infra.sh; ClickHouse: the chDB-backed HTTP shim, in a process of its own.
  const { backends, shim } = await productionBackends('bench-mem', tempDir('clickhouse'), { track, cleanup: (fn) => cleanups.push(fn) });
  log(`ClickHouse shim (chDB) on ${backends.clickhouseUrl}`);

  // The bench's account is the instance administrator: /api/health/evaluation shows the counters it waits for.
  const opsEmail = `bench-memory-${process.pid}@example.com`;
  const production = (roles: string, dir: string) => productionEnv(backends, roles, dir, { ADMIN_EMAILS: opsEmail });

  // The control plane (and a worker): the API the flags are created through. Not measured.
  const control = track(startApp('control', production('control,worker', tempDir('control'))));
  const api = await listenerUrl(control, 'control', 90_000);
  await control.waitForLine((l) => l.includes('Temporal worker running'), 90_000, 'Temporal worker');
  await healthy(api, 30_000);
  log(`control plane + worker (pid ${control.pid}) on ${api}`);

  const session = await signUp(api, opsEmail);
  // The bench owns this database: marking the address verified stands in for the verification mail.
  const db = postgres(backends.databaseUrl, { max: 1, onnotice: () => undefined });
  await db`UPDATE users SET email_verified = true WHERE email = ${opsEmail}`;
  await db.end();
  const projectId = await createProject(session, 'Memory bench');
  const modestService = await createService(session, projectId, 'web');
  await bulkCreate(session, modestService, 'production', 'web', 0, MODEST_FLAGS, 1);
  const token = await createReadToken(session, projectId);
  log(`modest project: 1 service, ${MODEST_FLAGS} flags, read token`);

  // The data plane, alone in its process: loads every service's flags at start.
  const data = track(startApp('data-plane', production('data', tempDir('data'))));
  const dataUrl = await listenerUrl(data, 'data', 60_000);
  await healthy(dataUrl, 30_000);
  log(`data plane (pid ${data.pid}) on ${dataUrl}`);
  for (const i of [0, 13, 42, 99]) {
    const key = `web-${i % 20 < 10 ? 'boolean' : i % 20 < 14 ? 'string' : i % 20 < 17 ? 'number' : 'object'}-${i}`;
    const answer = await evaluate(dataUrl, token, modestService, key);
    if (answer.reason === 'ERROR') throw new Error(`data plane evaluated ${key} as ${JSON.stringify(answer)}`);
  }
  const idleHealth = await evaluationHealth(dataUrl, session);
  if (idleHealth.snapshots.flags < MODEST_FLAGS) throw new Error(`data plane holds ${idleHealth.snapshots.flags} flags, expected ${MODEST_FLAGS}`);
  log(`bar 1: data plane evaluates the modest project (${idleHealth.snapshots.flags} flags in snapshots); settling`);
  const idle = await measure(data);
  log(`bar 1: RSS ${mb(idle.after.proc.rss)} after GC`);

  // 10,000 flags in a second service, created while the data plane runs: they reach its snapshot over the bus.
  const bigService = await createService(session, projectId, 'catalog');
  const probe = await evaluate(dataUrl, token, bigService, 'not-there-yet');
  if (probe.errorCode !== 'FLAG_NOT_FOUND') throw new Error(`unexpected answer for an empty service: ${JSON.stringify(probe)}`);
  const seedStart = performance.now();
  const seeded = await bulkCreate(session, bigService, 'production', 'cat', 0, SEED_FLAGS, BULK_PARALLEL);
  const seedSeconds = (performance.now() - seedStart) / 1000;
  log(`bar 2: created ${seeded.created} flags with ${seeded.requests} POST /api/flags/bulk in ${seedSeconds.toFixed(1)} s; waiting for the data plane`);
  const expected = MODEST_FLAGS + SEED_FLAGS;
  const held = await waitFor(`${expected} flags in the data plane's snapshots`, 120_000, async () => {
    const h = await evaluationHealth(dataUrl, session);
    return h.snapshots.flags >= expected ? h : undefined;
  });
  const propagationSeconds = (performance.now() - seedStart) / 1000 - seedSeconds;
  for (const i of [0, 1, 17, 4242, SEED_FLAGS - 1].filter((n) => n < SEED_FLAGS)) {
    const key = `cat-${i % 20 < 10 ? 'boolean' : i % 20 < 14 ? 'string' : i % 20 < 17 ? 'number' : 'object'}-${i}`;
    const answer = await evaluate(dataUrl, token, bigService, key);
    if (answer.reason === 'ERROR') throw new Error(`data plane evaluated ${key} as ${JSON.stringify(answer)}`);
  }
  log(`bar 2: data plane holds ${held.snapshots.flags} flags in ${held.snapshots.services} services and evaluates them; settling`);
  const flags = await measure(data);
  log(`bar 2: RSS ${mb(flags.after.proc.rss)} after GC; reading idle CPU for ${IDLE_CPU_MS / 1000} s`);
  const flagsCpu = await idleCpu(data.pid, IDLE_CPU_MS);
  log(`bar 2: idle CPU ${pct(flagsCpu.share)} of a core; RSS ${mb(flagsCpu.rss)} at the end of that idle minute`);
  const finalHealth = await evaluationHealth(dataUrl, session);

  const result: ProductionResult = {
    idle,
    flags,
    flagsCpu,
    flagsHeld: held.snapshots.flags,
    servicesHeld: held.snapshots.services,
    seedSeconds,
    propagationSeconds,
    eventsWritten: Number(finalHealth.evaluationEvents.written ?? 0),
    snapshotEvents: { applied: Number(held.snapshots.eventsApplied ?? 0), ignored: Number(held.snapshots.eventsIgnored ?? 0) },
    shim: procMemory(shim.pid),
    control: procMemory(control.pid),
  };
  await stopChild(data);
  await stopChild(control);
  await stopChild(shim);
  return result;
}

/** One reading of the embedded profile: the app after GC, its children (the Temporal dev server) then, and idle CPU after. */
interface EmbeddedSample {
  app: Measured;
  children: { pid: number; name: string; rss: number }[];
  /** App and children. */
  rss: number;
  cpu: IdleCpu;
}

interface EmbeddedResult {
  idle: EmbeddedSample;
  afterUse?: EmbeddedSample & { use: LightUse };
  startSeconds: number;
}

async function sampleEmbedded(app: Child, label: string): Promise<EmbeddedSample> {
  const measured = await measure(app);
  const children = descendants(app.pid).map((d) => ({ ...d, rss: procMemory(d.pid)?.rss ?? 0 }));
  const rss = measured.after.proc.rss + children.reduce((sum, c) => sum + c.rss, 0);
  log(`bar 3 (${label}): RSS ${mb(rss)} (app ${mb(measured.after.proc.rss)} after GC, ${children.map((c) => `${c.name} ${mb(c.rss)}`).join(', ') || 'no child'}); reading idle CPU for ${IDLE_CPU_MS / 1000} s`);
  const cpu = await idleCpu(app.pid, IDLE_CPU_MS);
  log(`bar 3 (${label}): idle CPU ${pct(cpu.share)} of a core (${cpu.processes.map((p) => `${p.name} ${pct(p.share)}`).join(', ')}); RSS ${mb(cpu.rss)} at the end of that idle minute (${cpu.processes.map((p) => `${p.name} ${mb(p.rss)}`).join(', ')})`);
  return { app: measured, children, rss, cpu };
}

/**
 * `npm start` on DATA_DIR=dir: every role, no backend URL (PGlite, in-process cache, chDB, the
 * app's own Temporal dev server). With `use`, read again after a few minutes of light use.
 */
async function runEmbedded(dir: string, label: string, use: boolean): Promise<EmbeddedResult> {
  const t0 = performance.now();
  const app = track(
    startApp(
      `embedded (${label})`,
      appEnv({
        DATA_DIR: dir,
        ...ANY_FREE_PORTS,
        ...(process.env.TEMPORAL_CLI_PATH ? { TEMPORAL_CLI_PATH: process.env.TEMPORAL_CLI_PATH } : {}),
      }),
    ),
  );
  const api = await listenerUrl(app, 'control', 120_000);
  const data = await listenerUrl(app, 'data', 10_000);
  await app.waitForLine((l) => l.includes('Temporal worker running'), 60_000, 'Temporal worker');
  await healthy(api, 60_000);
  const startSeconds = (performance.now() - t0) / 1000;
  log(`bar 3 (${label}): embedded profile (pid ${app.pid}) healthy on ${api} after ${startSeconds.toFixed(1)} s; settling`);
  const idle = await sampleEmbedded(app, label);
  let afterUse: EmbeddedResult['afterUse'];
  if (use) {
    const session = await signUp(api);
    const projectId = await createProject(session, 'Light use');
    const serviceId = await createService(session, projectId, 'shop');
    await bulkCreate(session, serviceId, 'production', 'use', 0, USE_FLAGS, 2);
    const token = await createReadToken(session, projectId);
    const keys = Array.from({ length: USE_FLAGS }, (_, i) => `use-${i % 20 < 10 ? 'boolean' : i % 20 < 14 ? 'string' : i % 20 < 17 ? 'number' : 'object'}-${i}`);
    log(`bar 3 (${label}): ${USE_FLAGS} flags created; light mixed use for ${USE_MS / 1000} s`);
    const done = await lightUse(data, session, token, { projectId, serviceId }, keys, USE_MS);
    log(`bar 3 (${label}): ${done.requests} requests (${Object.entries(done.byKind).map(([k, n]) => `${n} ${k}`).join(', ')}); settling`);
    afterUse = { ...(await sampleEmbedded(app, `${label}, after use`)), use: done };
  }
  await stopChild(app);
  return { idle, afterUse, startSeconds };
}

// ---------------------------------------------------------------------------------------------

function table(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ');
  return [line(rows[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

const EMPTY = ['', '', '', '', '', '', '', '', ''];

function verdict(rss: number, limit: number, cpu?: number, cpuLimit?: number): string {
  const memory = `${Math.round((rss / limit) * 100)}% of limit`;
  const cpuMet = cpu === undefined || cpuLimit === undefined || cpu < cpuLimit;
  const cpuPart = cpu !== undefined && cpuLimit !== undefined ? `, CPU ${Math.round((cpu / cpuLimit) * 100)}% of limit` : '';
  return rss < limit && cpuMet ? `met (${memory}${cpuPart})` : `NOT MET (${memory}${cpuPart})`;
}

/**
 * bar, limit, RSS while idling, RSS after GC, RSS before GC, anon, file, heapUsed, external, idle
 * CPU, verdict. `idle`: the idle window read after the GC (CPU share, RSS at its end); the bar is
 * judged on the RSS while idling when there is one, else on the RSS after GC.
 */
function row(name: string, limit: number | undefined, m: Measured | undefined, idle?: { share: number; rss: number }, error?: string): string[] {
  if (!m) return [name, limit ? mb(limit) : '', '-', '', '', '', '', '', '', '', error ? `NOT MEASURED (${error})` : 'NOT MEASURED'];
  const a = m.after;
  return [
    name,
    limit ? mb(limit) : '',
    idle ? mb(idle.rss) : '',
    mb(a.proc.rss),
    mb(m.before.proc.rss),
    mb(a.proc.anon),
    mb(a.proc.file),
    mb(a.usage.heapUsed),
    mb(a.usage.external),
    idle === undefined ? '' : pct(idle.share),
    limit ? verdict(idle?.rss ?? a.proc.rss, limit) : '',
  ];
}

/** The embedded bar's row (app and Temporal counted together), then each process on its own. */
function embeddedRows(name: string, sample: EmbeddedSample | undefined, error?: string): string[][] {
  if (!sample) return [[name, mb(LIMIT_EMBEDDED), '-', ...EMPTY.slice(0, 7), error ? `NOT MEASURED (${error})` : 'NOT MEASURED']];
  const idleOf = (pid: number) => sample.cpu.processes.find((p) => p.pid === pid);
  return [
    [`${name}: app + Temporal`, `${mb(LIMIT_EMBEDDED)}, ${pct(LIMIT_EMBEDDED_CPU)}`, mb(sample.cpu.rss), mb(sample.rss), '', '', '', '', '', pct(sample.cpu.share), verdict(sample.cpu.rss, LIMIT_EMBEDDED, sample.cpu.share, LIMIT_EMBEDDED_CPU)],
    row('   app process (node)', undefined, sample.app, sample.cpu.processes[0]),
    ...sample.children.map((c) => {
      const m = procMemory(c.pid);
      const idle = idleOf(c.pid);
      return [`   ${c.name} (child)`, '', idle ? mb(idle.rss) : '', mb(c.rss), '', m ? mb(m.anon) : '', m ? mb(m.file) : '', '', '', pct(idle?.share ?? 0), ''];
    }),
  ];
}

async function main() {
  const watchdog = setTimeout(() => abort(`still running after ${TIMEOUT_MS / 1000} s, giving up`, 1), TIMEOUT_MS);
  watchdog.unref();

  if (process.env.BENCH_BUILD !== '0') {
    log('npm run build');
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  }

  let production: ProductionResult | undefined;
  let productionError: string | undefined;
  try {
    production = await runProduction();
  } catch (error) {
    productionError = (error as Error).message;
    if (!aborting) log(`production profile failed: ${productionError}`);
  }
  await cleanUp();
  if (aborting) return new Promise<boolean>(() => undefined); // the abort handler exits
  cleaningUp = undefined;

  // First start on an empty DATA_DIR (PGlite runs initdb), then a restart on the same DATA_DIR (what `npm start` does on ./data later).
  const embedded: Partial<Record<'first' | 'restart', EmbeddedResult>> = {};
  let embeddedError: string | undefined;
  try {
    const dir = tempDir('embedded');
    embedded.first = await runEmbedded(dir, 'first start', false);
    embedded.restart = await runEmbedded(dir, 'restart', true);
  } catch (error) {
    embeddedError = (error as Error).message;
    if (!aborting) log(`embedded profile failed: ${embeddedError}`);
  }
  await cleanUp();
  if (aborting) return new Promise<boolean>(() => undefined);

  const header = ['bar', 'limit', 'RSS idling', 'RSS after GC', 'RSS before GC', 'anon', 'file', 'heapUsed', 'external', 'idle CPU', 'verdict'];
  const notRun = (error: string | undefined) => error && 'run failed';
  const rows = [
    header,
    row(`1. data plane idle, production profile (${MODEST_FLAGS} flags)`, LIMIT_DATA_IDLE, production?.idle, undefined, notRun(productionError)),
    row(`2. data plane holding ${(production?.flagsHeld ?? MODEST_FLAGS + SEED_FLAGS).toLocaleString('en-US')} flags, production profile`, LIMIT_DATA_FLAGS, production?.flags, production?.flagsCpu, notRun(productionError)),
    ...embeddedRows('3. embedded idle, first start', embedded.first?.idle, notRun(embeddedError)),
    ...embeddedRows('3. embedded idle, restart', embedded.restart?.idle, notRun(embeddedError)),
    ...embeddedRows(`3. embedded idle, restart, after ${USE_MS / 1000} s of light use`, embedded.restart?.afterUse, notRun(embeddedError)),
  ];
  if (production?.shim) rows.push(['   not counted: ClickHouse shim (chDB), bars 1-2', '', '', mb(production.shim.rss), '', mb(production.shim.anon), mb(production.shim.file), '', '', '', '']);
  if (production?.control) rows.push(['   not counted: control plane + worker, bars 1-2', '', '', mb(production.control.rss), '', mb(production.control.anon), mb(production.control.file), '', '', '', '']);
  console.log('');
  console.log(table(rows));
  console.log('');
  console.log(
    `RSS after GC: VmRSS after ${SETTLE_MS / 1000} s of settling, a full GC and ${AFTER_GC_MS / 1000} s; "RSS before GC" is the same process just before that GC. ` +
      `RSS idling: VmRSS at the end of the idle CPU window below, once the process has idled ${(IDLE_SETTLE_MS + IDLE_CPU_MS) / 1000} s more (part of what a burst of work grew is given back while idling); a bar with that reading is judged on it. ` +
      'anon/file: RssAnon/RssFile. heapUsed/external: process.memoryUsage() of the main thread. ' +
      `Idle CPU: user + system time over ${IDLE_CPU_MS / 1000} s without traffic, ${IDLE_SETTLE_MS / 1000} s after that reading, as a share of one core (the embedded bar counts the app and its Temporal dev server).`,
  );
  console.log('');
  console.log('Where the memory goes (after GC):');
  const where = (name: string, m: Measured | undefined) => {
    if (!m) return;
    const a = m.after;
    const maps = [...a.mappings].sort((x, y) => y[1] - x[1]);
    const top = maps.slice(0, 5).map(([k, v]) => `${k} ${mb(v)}`);
    const rest = maps.slice(5).reduce((sum, [, v]) => sum + v, 0);
    console.log(
      `  ${name}: V8 heap ${mb(a.usage.heapUsed)} used of ${mb(a.usage.heapTotal)}; external ${mb(a.usage.external)} (array buffers ${mb(a.usage.arrayBuffers)}, ` +
        `the rest native/WebAssembly memory); ${a.threads} threads; RSS by mapping: ${top.join(', ')}, other ${mb(rest)}`,
    );
  };
  where('1. data plane idle', production?.idle);
  where(`2. data plane ${production?.flagsHeld.toLocaleString('en-US') ?? ''} flags`, production?.flags);
  where('3. embedded first start', embedded.first?.idle.app);
  where('3. embedded restart', embedded.restart?.idle.app);
  where('3. embedded restart, after use', embedded.restart?.afterUse?.app);
  console.log('');
  if (production) {
    const added = production.flagsHeld - MODEST_FLAGS;
    const perFlag = (production.flags.after.usage.heapUsed - production.idle.after.usage.heapUsed) / added;
    const rssDelta = production.flags.after.proc.rss - production.idle.after.proc.rss;
    console.log(
      `Bar 2: ${added.toLocaleString('en-US')} flags created in ${production.seedSeconds.toFixed(1)} s through POST /api/flags/bulk (control plane), all in the data plane's snapshots ` +
        `${production.propagationSeconds.toFixed(1)} s after the last request (${production.flagsHeld.toLocaleString('en-US')} flags in ${production.servicesHeld} services); ` +
        `${(perFlag / 1024).toFixed(1)} KB of V8 heap per flag; RSS ${rssDelta >= 0 ? '+' : '-'}${mb(Math.abs(rssDelta))} against bar 1 ` +
        `(heap total ${mb(production.idle.after.usage.heapTotal)} -> ${mb(production.flags.after.usage.heapTotal)}). ` +
        `Its snapshots applied ${production.snapshotEvents.applied.toLocaleString('en-US')} change events (${production.snapshotEvents.ignored} ignored)` +
        (production.snapshotEvents.applied > added ? `, ${production.snapshotEvents.applied - added} more than flags created: changes the periodic reconcile against Postgres applied` : '') +
        `. It wrote ${production.eventsWritten} evaluation events to ClickHouse (the shim).`,
    );
  }
  for (const [label, e] of Object.entries(embedded)) {
    console.log(`Bar 3 (${label}): healthy ${e.startSeconds.toFixed(1)} s after start (the embedded profile seeds the 4,096-flag demo service).`);
    if (e.afterUse) console.log(`Bar 3 (${label}), light use: ${e.afterUse.use.requests} requests in ${USE_MS / 1000} s (${Object.entries(e.afterUse.use.byKind).map(([k, n]) => `${n} ${k}`).join(', ')}) on ${USE_FLAGS} flags, then ${SETTLE_MS / 1000} s of settling.`);
  }
  if (productionError) console.log(`Bars 1-2 not measured: ${productionError}`);
  if (embeddedError) console.log(`Bar 3 not measured: ${embeddedError}`);
  log(`done in ${((performance.now() - startedAt) / 1000).toFixed(0)} s`);
  return production !== undefined && embedded.first !== undefined && embedded.restart !== undefined;
}

// Exit code 1 when a bar could not be measured; a bar that is measured and missed is reported in the table.
main().then(
  (measured) => process.exit(measured ? 0 : 1),
  (error) => {
    console.error(error);
    void cleanUp().finally(() => process.exit(1));
  },
);
