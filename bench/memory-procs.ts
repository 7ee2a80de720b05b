/**
 * Child processes of `npm run bench:memory` (bench/memory.ts) and how their memory is read;
 * bench:faults and bench:peers start the app through them too, and bench:peers its production
 * profile's backends (productionBackends).
 *
 * The app runs exactly as `npm start` and the Docker image run it: `node dist/api/main.js`
 * (built code, no tsx) with the node flags scripts/run-api.sh gives its roles and CPUs, with ROLES
 * and the backends in its environment. The multi-instance test
 * (test/platform/multi-instance.test.ts) starts its processes through them too. The only addition is a
 * few lines evaluated before main.js (`node --expose-gc -e ...`) that answer `memory` requests
 * over the IPC channel (optionally after a full GC) and shut the app down (SIGTERM path) when
 * the parent goes away. Each child leads its own process group, so whatever it starts (the
 * embedded profile's Temporal dev server) can be found and, if needed, killed with it.
 *
 * RSS comes from /proc/<pid>/status (VmRSS, and its RssAnon/RssFile/RssShmem parts), heap figures
 * from process.memoryUsage() in the child, CPU time from /proc/<pid>/stat (utime + stime).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import Redis from 'ioredis';
import postgres from 'postgres';
import { ANY_FREE_PORTS, CONFIG_VARIABLES } from '../api/config';
import { SERVER_NODE, deployedNodeFlags } from './server-process';

export const ROOT = path.resolve(__dirname, '..');
const MAIN = path.join(ROOT, 'dist', 'api', 'main.js');

const PRELOAD = `
const v8 = require('node:v8');
process.on('message', (m) => {
  if (!m || m.type !== 'memory') return;
  if (m.gc && typeof globalThis.gc === 'function') { globalThis.gc(); globalThis.gc(); }
  process.send({ type: 'memory', id: m.id, usage: process.memoryUsage(), heapTotalAvailable: v8.getHeapStatistics().total_available_size });
});
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
require(${JSON.stringify(MAIN)});
`;

export interface ProcMemory {
  /** Bytes. */
  rss: number;
  anon: number;
  file: number;
  shmem: number;
}

/** VmRSS and its parts from /proc/<pid>/status; undefined when the process is gone. */
export function procMemory(pid: number): ProcMemory | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile'), shmem: kb('RssShmem') };
}

/** RSS by mapping from /proc/<pid>/smaps: files by base name, `[anon]` for anonymous memory, `[heap]` (malloc's brk heap), `[stack]` ... */
export function mappings(pid: number): Map<string, number> {
  const groups = new Map<string, number>();
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return groups;
  }
  let current = '[anon]';
  for (const line of text.split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      current = header[1] ? (header[1].startsWith('[') ? header[1] : path.basename(header[1])) : '[anon]';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) groups.set(current, (groups.get(current) ?? 0) + Number(rss[1]) * 1024);
  }
  return groups;
}

/** Clock ticks per second of /proc/<pid>/stat's CPU times. */
export const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

/** CPU time (user + system, all threads) a process used so far, in seconds; undefined when it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime: fields 14 and 15 of stat(5), 12 and 13 after the name.
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

export function threadCount(pid: number): number {
  try {
    return Number(/^Threads:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** CPU time (user + system) of a process and every descendant it has now, in seconds; 0 for what is gone. */
export function treeCpuSeconds(pid: number): number {
  return [pid, ...descendants(pid).map((d) => d.pid)].reduce((sum, p) => sum + (cpuSeconds(p) ?? 0), 0);
}

/** Every descendant of pid (children, grandchildren ...), from /proc/<n>/stat. */
export function descendants(pid: number): { pid: number; name: string }[] {
  const parentOf = new Map<number, { ppid: number; name: string }>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const name = stat.slice(stat.indexOf('(') + 1, close);
      const ppid = Number(stat.slice(close + 2).split(' ')[1]);
      parentOf.set(Number(entry), { ppid, name });
    } catch {
      // gone meanwhile
    }
  }
  const out: { pid: number; name: string }[] = [];
  const walk = (p: number) => {
    for (const [child, info] of parentOf) {
      if (info.ppid === p) {
        out.push({ pid: child, name: info.name });
        walk(child);
      }
    }
  };
  walk(pid);
  return out;
}

export interface MemorySample {
  proc: ProcMemory;
  usage: NodeJS.MemoryUsage;
  mappings: Map<string, number>;
  threads: number;
}

/** A child Node process with an IPC channel, its output kept (last lines) and scanned for log messages. */
export class Child {
  readonly tail: string[] = [];
  private readonly waiters: { test: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  private readonly exited: Promise<number | null>;
  private nextId = 1;

  constructor(
    readonly name: string,
    readonly proc: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
    for (const stream of [proc.stdout, proc.stderr]) {
      if (!stream) continue;
      readline.createInterface({ input: stream }).on('line', (line) => this.onLine(line));
    }
  }

  get pid(): number {
    return this.proc.pid!;
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  private onLine(line: string) {
    this.tail.push(line);
    if (this.tail.length > 60) this.tail.shift();
    if (process.env.BENCH_VERBOSE) console.error(`[${this.name}] ${line}`);
    for (const w of [...this.waiters]) {
      if (w.test(line)) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  }

  /** The first output line (from now on, or already in the tail) for which test is true. */
  waitForLine(test: (line: string) => boolean, timeoutMs: number, what: string): Promise<string> {
    const seen = this.tail.find(test);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(this.failure(`no ${what} within ${timeoutMs / 1000} s`)), timeoutMs);
      const waiter = {
        test,
        resolve: (line: string) => {
          clearTimeout(timer);
          resolve(line);
        },
      };
      this.waiters.push(waiter);
      void this.exited.then((code) => {
        clearTimeout(timer);
        reject(this.failure(`exited with ${code} before ${what}`));
      });
    });
  }

  /** An IPC message of `type` in answer to `message`. */
  ask<T>(message: Record<string, unknown>, type: string, timeoutMs = 15_000): Promise<T> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.proc.off('message', on);
        reject(this.failure(`no ${type} answer within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      const on = (m: { type?: string; id?: number }) => {
        if (m?.type === type && (m.id === undefined || m.id === id)) {
          clearTimeout(timer);
          this.proc.off('message', on);
          resolve(m as T);
        }
      };
      this.proc.on('message', on);
      this.proc.send({ ...message, id });
    });
  }

  /** RSS from /proc and the child's own process.memoryUsage(), after a full GC when gc is set. */
  async memory(gc: boolean): Promise<MemorySample> {
    const { usage } = await this.ask<{ usage: NodeJS.MemoryUsage }>({ type: 'memory', gc }, 'memory');
    const proc = procMemory(this.pid);
    if (!proc) throw this.failure('is gone');
    return { proc, usage, mappings: mappings(this.pid), threads: threadCount(this.pid) };
  }

  failure(message: string): Error {
    return new Error(`${this.name} (pid ${this.proc.pid}) ${message}; its last output:\n${this.tail.slice(-25).join('\n')}`);
  }

  /** SIGTERM (the app's graceful shutdown), SIGKILL to its whole process group after graceMs. */
  async stop(graceMs = 20_000): Promise<void> {
    if (this.running) {
      try {
        process.kill(this.pid, 'SIGTERM');
      } catch {
        // already gone
      }
      let timer: NodeJS.Timeout | undefined;
      const killed = await Promise.race([this.exited.then(() => false), new Promise<boolean>((r) => (timer = setTimeout(() => r(true), graceMs)))]);
      clearTimeout(timer);
      if (killed) console.error(`${this.name} did not stop within ${graceMs / 1000} s; killing it`);
    }
    this.killGroup();
    await this.exited;
  }

  /** SIGKILL to the child's process group (it and anything it started that is still there). */
  killGroup(): void {
    try {
      process.kill(-this.pid, 'SIGKILL');
    } catch {
      // no such group: nothing left
    }
  }
}

/**
 * `node --expose-gc dist/api/main.js` (through the IPC preload; SERVER_NODE) with exactly this environment,
 * and the node flags scripts/run-api.sh gives its roles (an ingesting process: a 64 MB young generation).
 * `cpus` (taskset's list, e.g. "0") pins it and every thread it starts.
 */
export function startApp(name: string, env: NodeJS.ProcessEnv, opts: { cpus?: string; nodeArgs?: string[] } = {}): Child {
  if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build`);
  const args = [...deployedNodeFlags(env, opts.cpus), ...(opts.nodeArgs ?? []), '--expose-gc', '-e', PRELOAD];
  // taskset execs node: the child's pid is node's.
  const proc = spawn(opts.cpus ? 'taskset' : SERVER_NODE, opts.cpus ? ['-c', opts.cpus, SERVER_NODE, ...args] : args, {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    detached: true,
  });
  return new Child(name, proc);
}

/** A TypeScript helper of bench/ in its own process (tsx), e.g. the ClickHouse shim. */
export function startScript(name: string, script: string, env: NodeJS.ProcessEnv): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, script)], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    detached: true,
  });
  return new Child(name, proc);
}

/** The URL a helper started with startScript (the ClickHouse shim) reports over IPC once it serves. */
export function reportedUrl(child: Child, timeoutMs = 60_000): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(child.failure(`did not report ready within ${timeoutMs / 1000} s`)), timeoutMs);
    child.proc.on('message', (m: { type?: string; url?: string }) => {
      if (m?.type === 'ready' && m.url) {
        clearTimeout(timer);
        resolve(m.url);
      }
    });
    child.proc.once('exit', (code) => reject(child.failure(`exited with ${code}`)));
  });
}

/** The parent's environment without any variable the app reads, plus what `npm start` sets, plus these. */
export function appEnv(vars: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const variable of CONFIG_VARIABLES) delete env[variable];
  delete env.NODE_OPTIONS;
  // As scripts/start.sh (npm start) and the Docker image set it.
  return { ...env, MALLOC_ARENA_MAX: '2', ...vars };
}

/** What the app processes of one bench run on the production profile share. */
export interface ProductionBackends {
  databaseUrl: string;
  redisUrl: string;
  keyPrefix: string;
  clickhouseUrl: string;
  temporalAddress: string;
  taskQueue: string;
  jwtKey: string;
}

/**
 * The production profile's backends for one bench run, on the servers of scripts/test-infra.sh
 * (DATABASE_URL, REDIS_URL, TEMPORAL_ADDRESS in the environment): a fresh database
 * `<name>_<pid>` ('-' as '_'), Redis keys under `<name>:<pid>:`, the Temporal task queue
 * `<name>-<pid>`, one JWT signing key, and ClickHouse as bench/memory-clickhouse.ts in a process
 * of its own (there is no ClickHouse server here). `hooks.track` takes the shim into the
 * caller's clean-up, `hooks.cleanup` dropping the database and deleting the keys.
 */
export async function productionBackends(
  name: string,
  clickhouseDir: string,
  hooks: { track: (child: Child) => Child; cleanup: (fn: () => Promise<void>) => void },
): Promise<{ backends: ProductionBackends; shim: Child }> {
  const { DATABASE_URL, REDIS_URL, TEMPORAL_ADDRESS } = process.env;
  if (!DATABASE_URL || !REDIS_URL || !TEMPORAL_ADDRESS) throw new Error('the production profile needs DATABASE_URL, REDIS_URL and TEMPORAL_ADDRESS: run `source scripts/test-infra.sh up` first');
  const shim = hooks.track(startScript('clickhouse-shim', 'memory-clickhouse.ts', { ...process.env, CH_SHIM_PATH: clickhouseDir }));
  const clickhouseUrl = await reportedUrl(shim);

  const database = `${name.replace(/-/g, '_')}_${process.pid}`;
  const admin = postgres(DATABASE_URL, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`CREATE DATABASE ${database}`);
  hooks.cleanup(async () => {
    const a = postgres(DATABASE_URL, { max: 1, onnotice: () => undefined });
    await a.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await a.end();
  });
  await admin.end();
  const databaseUrl = new URL(DATABASE_URL);
  databaseUrl.pathname = `/${database}`;

  const keyPrefix = `${name}:${process.pid}:`;
  hooks.cleanup(async () => {
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1000);
        if (keys.length) await redis.del(...keys);
        cursor = next;
      } while (cursor !== '0');
    } finally {
      redis.disconnect();
    }
  });
  const jwtKey = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  return {
    backends: { databaseUrl: databaseUrl.toString(), redisUrl: REDIS_URL, keyPrefix, clickhouseUrl, temporalAddress: TEMPORAL_ADDRESS, taskQueue: `${name}-${process.pid}`, jwtKey },
    shim,
  };
}

/** The environment of an app process with these roles on the production profile: loopback, every port chosen by the system, plus `vars`. */
export function productionEnv(b: ProductionBackends, roles: string, dataDir: string, vars: Record<string, string> = {}): NodeJS.ProcessEnv {
  return appEnv({
    NODE_ENV: 'production',
    ROLES: roles,
    HOST: '127.0.0.1',
    ...ANY_FREE_PORTS,
    DATA_DIR: dataDir,
    DATABASE_URL: b.databaseUrl,
    REDIS_URL: b.redisUrl,
    REDIS_KEY_PREFIX: b.keyPrefix,
    CLICKHOUSE_URL: b.clickhouseUrl,
    TEMPORAL_ADDRESS: b.temporalAddress,
    TEMPORAL_TASK_QUEUE: b.taskQueue,
    JWT_PRIVATE_KEY: b.jwtKey,
    ...vars,
  });
}

/** The URL the app logged for one listener (`{"listener":"data","url":...,"msg":"listening"}`). */
export async function listenerUrl(child: Child, listener: 'control' | 'data' | 'ingest' | 'flagd-sync' | 'management', timeoutMs: number): Promise<string> {
  const line = await child.waitForLine(
    (l) => l.includes('"msg":"listening"') && l.includes(`"listener":"${listener}"`),
    timeoutMs,
    `${listener} listener`,
  );
  return (JSON.parse(line) as { url: string }).url;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
