/**
 * The bench server child (bench/eval-server.ts) as benches drive it: start it, ask it over IPC,
 * stop it; `call`, the API request the set-up steps make, and `signUp`, the session they make it with.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export interface ServerUrls {
  control: string;
  data: string;
  /** The flagd listeners (FLAGD_PORT, FLAGD_SYNC_PORT) on the data plane. */
  flagd?: string;
  flagdSync?: string;
  bare: string;
  express: string;
}

/**
 * The node our servers run on: BENCH_SERVER_NODE (a node binary, e.g. the production image's
 * major: docs/data-plane.md#benchmarks), else the one running the bench.
 */
export const SERVER_NODE = process.env.BENCH_SERVER_NODE || process.execPath;

/** `vX.Y.Z` of SERVER_NODE, for a bench's header. */
export function serverNodeVersion(): string {
  return execFileSync(SERVER_NODE, ['--version'], { encoding: 'utf8' }).trim();
}

/**
 * The node flags scripts/run-api.sh (the one place that decides them) gives a process started with
 * `env` (its ROLES) on `cpus` (a taskset list; else this process's own CPUs, which a child
 * inherits), so a bench measures a server as it is deployed.
 */
export function deployedNodeFlags(env: NodeJS.ProcessEnv, cpus?: string): string[] {
  const script = ['sh', path.join(__dirname, '..', 'scripts', 'run-api.sh'), '--print-node-flags'];
  const [command, ...args] = cpus ? ['taskset', '-c', cpus, ...script] : script;
  // The flags depend on the node major: the script asks the `node` first on PATH, so SERVER_NODE's.
  const withServerNode = { ...env, PATH: `${path.dirname(SERVER_NODE)}${path.delimiter}${env.PATH ?? ''}` };
  return execFileSync(command, args, { env: withServerNode, encoding: 'utf8' }).split(/\s+/).filter(Boolean);
}

/**
 * Starts bench/eval-server.ts with the node flags its roles get as deployed; `pinned` runs it on
 * CPU 0 (taskset), `nodeArgs` go after the deployed flags, before the script; an `env` entry set to
 * undefined is left out.
 */
export function startEvalServer(opts: { env?: NodeJS.ProcessEnv; pinned?: boolean; nodeArgs?: string[] } = {}): Promise<{ child: ChildProcess; urls: ServerUrls }> {
  const script = path.join(__dirname, 'eval-server.ts');
  const env = { ...process.env, ...opts.env };
  // bench/eval-server.ts serves BENCH_SERVER_ROLES, the control and data roles unless told.
  const flags = deployedNodeFlags({ ...env, ROLES: env.BENCH_SERVER_ROLES ?? 'control,data' }, opts.pinned ? '0' : undefined);
  const args = [...(opts.pinned ? ['-c', '0', SERVER_NODE] : []), ...flags, ...(opts.nodeArgs ?? []), '--import', 'tsx', script];
  const child = spawn(opts.pinned ? 'taskset' : SERVER_NODE, args, {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env,
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
    child.on('message', (m: { type: string } & ServerUrls) => {
      if (m.type === 'ready') resolve({ child, urls: m });
    });
  });
}

/** Sends `message` and resolves with the first message of type `reply`. */
export function ask<T>(child: ChildProcess, message: object, reply: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: { type: string }) => {
      if (m.type === reply) {
        child.off('message', on);
        resolve(m as T);
      }
    };
    child.on('message', on);
    child.send(message);
  });
}

/** Asks the server to shut down gracefully; SIGKILL after 30 s. */
export function stopServer(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve();
    }, 30_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.send({ type: 'stop' });
  });
}

/** One API request of a bench's set-up; anything but 2xx throws with the answer's start. */
export async function call(method: string, url: string, opts: { body?: unknown; cookie?: string; csrf?: string; token?: string } = {}) {
  const headers: Record<string, string> = {};
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  if (opts.cookie) headers.cookie = opts.cookie;
  if (opts.csrf) headers['x-csrf-token'] = opts.csrf;
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const res = await fetch(url, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text.slice(0, 500)}`);
  return { res, body: text ? JSON.parse(text) : undefined, text };
}

/** A new user's dashboard session: the cookie and CSRF header a bench's set-up calls send. */
export async function signUp(api: string): Promise<{ cookie: string; csrf: string }> {
  const email = `bench-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  const signup = await call('POST', `${api}/api/auth/signup`, { body: { email, password: 'benchmark password', name: 'Bench' } });
  const cookie = (signup.res.headers.get('set-cookie') ?? '').split(';')[0];
  const csrf = (await call('GET', `${api}/api/csrf-token`, { cookie })).body.token as string;
  return { cookie, csrf };
}
