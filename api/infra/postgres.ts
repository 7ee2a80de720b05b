import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import postgres from 'postgres';
import { currentDeadline } from './deadline';
import type { Logger } from './logger';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;
/** The pool or a transaction: store functions run in whichever the service hands them. */
export type Queryable = postgres.ISql;

/** The driver's pool by state, as the patched postgres.js exposes it (patches/). */
export interface PoolState {
  idle: number;
  /** Connecting for a query, running queries, or held by a transaction. */
  inUse: number;
  /** Queries waiting for a connection: not given one yet, or written behind another query on a busy one. */
  waiting: number;
}

export function poolState(sql: Sql): PoolState {
  return (sql as unknown as { pool: PoolState }).pool;
}

export interface Database {
  sql: Sql;
  /** Where the database lives, for health output: `postgres` or `pglite`. */
  backend: 'postgres' | 'pglite';
  url: string;
  close(): Promise<void>;
}

export interface PostgresOptions {
  url?: string;
  /** Names this process's sessions in pg_stat_activity (an operator's view; fault tests find them by it). */
  applicationName: string;
  poolSize: number;
  /** A connection waiting this long for any byte of an answer is destroyed (its server or the network is gone). */
  replyTimeoutMs: number;
  /** Bound of one connection attempt. */
  connectTimeoutMs: number;
  dataDir: string;
  logger: Logger;
}

/**
 * Connects through the `postgres` driver in both profiles. Without DATABASE_URL we run PGlite
 * and serve it over the wire protocol on a loopback port, so the exact same SQL and driver are
 * used; PGlite is single-connection, so the pool is one connection there.
 */
export async function openDatabase(opts: PostgresOptions): Promise<Database> {
  if (opts.url) {
    const sql = connect(opts.url, opts.poolSize, opts);
    return { sql, backend: 'postgres', url: opts.url, close: () => sql.end({ timeout: 5 }) };
  }
  const dir = path.join(opts.dataDir, 'pglite');
  fs.mkdirSync(dir, { recursive: true });
  // A new directory is initialized (initdb) in a process of its own that then exits: initdb's
  // WebAssembly instance stayed allocated in the serving thread, which is idle enough never to
  // collect it, and a thread's freed memory stays in this process's malloc heap
  // (docs/operations.md#resource-use-at-idle).
  if (!fs.existsSync(path.join(dir, 'PG_VERSION'))) await initializePglite(dir);
  const thread = await startPgliteThread(dir, opts.logger);
  const url = `postgres://postgres@${thread.hostPort}/postgres`;
  opts.logger.info({ address: thread.hostPort }, 'embedded PGlite serving the Postgres protocol');
  const sql = connect(url, 1, opts);
  return {
    sql,
    backend: 'pglite',
    url,
    async close() {
      await sql.end({ timeout: 5 });
      await thread.stop();
    },
  };
}

/** Runs PGlite's initdb on `dir` in a child process. */
async function initializePglite(dir: string): Promise<void> {
  const script = `require(${JSON.stringify(require.resolve('@electric-sql/pglite'))}).PGlite.create(${JSON.stringify(dir)}).then((db) => db.close())`;
  await promisify(execFile)(process.execPath, ['-e', script], { maxBuffer: 16 * 1024 * 1024 });
}

/** Starts api/infra/pglite-thread (the .ts source under tsx, the built .js otherwise) and waits for its address. */
async function startPgliteThread(dir: string, logger: Logger): Promise<{ hostPort: string; stop(): Promise<void> }> {
  const script = path.join(__dirname, `pglite-thread${path.extname(__filename)}`);
  // Threads do not inherit tsx's hooks: from the TypeScript source (npm run dev, benches) the
  // thread registers them itself before loading its module.
  const worker = script.endsWith('.ts')
    ? new Worker(`require('tsx/cjs'); require(${JSON.stringify(script)});`, { eval: true, workerData: { dir } })
    : new Worker(script, { workerData: { dir } });
  const hostPort = await new Promise<string>((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the PGlite thread exited with ${code} before it was ready`)));
    worker.on('message', (m: { type: string; hostPort?: string; message?: string }) => {
      if (m.type === 'ready') resolve(m.hostPort!);
      if (m.type === 'failed') reject(new Error(`PGlite did not start: ${m.message}`));
    });
  });
  worker.removeAllListeners('exit');
  worker.removeAllListeners('error');
  // Queries then fail on the closed socket, and the health check says so.
  worker.on('error', (error) => logger.error({ err: error }, 'the embedded PGlite thread failed'));
  return {
    hostPort,
    async stop() {
      const stopped = new Promise<void>((resolve) => worker.on('message', (m: { type: string }) => m.type === 'stopped' && resolve()));
      worker.postMessage({ type: 'stop' });
      await stopped;
      await worker.terminate();
    },
  };
}

function connect(url: string, max: number, bounds: Pick<PostgresOptions, 'replyTimeoutMs' | 'connectTimeoutMs' | 'applicationName'>): Sql {
  // `socket` (a factory of connected sockets) is a documented option its types leave out.
  const sockets = { socket: (options: SocketOptions) => openWatchedSocket(options, bounds) };
  const sql = postgres(url, {
    max,
    onnotice: () => undefined,
    transform: { undefined: null },
    connection: { application_name: bounds.applicationName },
    // Reconnect attempts after a failure: the driver's default grows to 20 s, which would hold
    // service back that long after the server is back.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    ...sockets,
  });
  guardCommits(sql);
  return sql;
}

/**
 * Inside a request, a transaction commits only before the request's deadline, and the request's
 * answer waits for a COMMIT already sent (api/infra/deadline.ts): a request answered 503 never
 * commits afterwards, and one that commits is answered with its result.
 */
function guardCommits(sql: Sql): void {
  const begin = sql.begin.bind(sql) as (options: string, fn: (tx: TransactionSql) => unknown) => Promise<unknown>;
  const guarded = (first: string | ((tx: TransactionSql) => unknown), second?: (tx: TransactionSql) => unknown) => {
    const [options, fn] = typeof first === 'string' ? [first, second!] : ['', first];
    const deadline = currentDeadline();
    if (!deadline) return begin(options, fn);
    const transaction: Promise<unknown> = begin(options, async (tx) => {
      const result = await fn(tx);
      // postgres.js sends COMMIT as soon as this callback's promise settles.
      deadline.beforeCommit(() => transaction);
      return result;
    });
    return transaction;
  };
  sql.begin = guarded as Sql['begin'];
}

// A chunk that ends with ReadyForQuery ('Z', length 5, status) leaves the connection idle.
const READY_FOR_QUERY = Buffer.from([0x5a, 0, 0, 0, 5]);

interface SocketOptions {
  host: string[];
  port: number[];
  path?: string | false;
}

/**
 * postgres.js waits on a connection for ever when its server or the network goes silent: its
 * sockets are opened here, and a socket that has sent a request and heard nothing for
 * replyTimeoutMs is destroyed, which fails its queries and frees the pool slot. The socket is
 * handed over before it connects (writes wait for the connection), so the driver's own error
 * and close handlers see every outcome, a reset right after the connect included.
 */
function openWatchedSocket(options: SocketOptions, bounds: Pick<PostgresOptions, 'replyTimeoutMs' | 'connectTimeoutMs'>): net.Socket {
  const socket = options.path ? net.connect(options.path) : net.connect(options.port[0], options.host[0]);
  const connectTimer = setTimeout(() => socket.destroy(Object.assign(new Error(`Postgres connect timed out after ${bounds.connectTimeoutMs} ms`), { code: 'CONNECT_TIMEOUT' })), bounds.connectTimeoutMs);
  socket.once('connect', () => clearTimeout(connectTimer));
  socket.once('close', () => clearTimeout(connectTimer));
  watchReplies(socket, bounds.replyTimeoutMs);
  return socket;
}

function watchReplies(socket: net.Socket, replyTimeoutMs: number): void {
  let waitingSince: number | undefined;
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  socket.write = ((...args: unknown[]) => {
    waitingSince ??= Date.now();
    return write(...args);
  }) as net.Socket['write'];
  let tail = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    tail = Buffer.concat([tail, chunk.subarray(-6)]).subarray(-6);
    const idle = tail.length === 6 && tail.subarray(0, 5).equals(READY_FOR_QUERY);
    waitingSince = idle ? undefined : Date.now();
  });
  const check = setInterval(() => {
    if (waitingSince !== undefined && Date.now() - waitingSince > replyTimeoutMs) {
      socket.destroy(Object.assign(new Error(`Postgres did not answer within ${replyTimeoutMs} ms`), { code: 'ETIMEDOUT' }));
    }
  }, Math.min(1000, replyTimeoutMs)).unref();
  socket.once('close', () => clearInterval(check));
}
