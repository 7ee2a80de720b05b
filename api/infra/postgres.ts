import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import postgres from 'postgres';
import type { Logger } from './logger';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;
/** The pool or a transaction: store functions run in whichever the service hands them. */
export type Queryable = postgres.ISql;

export interface Database {
  sql: Sql;
  /** Where the database lives, for health output: `postgres` or `pglite`. */
  backend: 'postgres' | 'pglite';
  url: string;
  close(): Promise<void>;
}

export interface PostgresOptions {
  url?: string;
  poolSize: number;
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
    const sql = connect(opts.url, opts.poolSize);
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
  const sql = connect(url, 1);
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

function connect(url: string, max: number): Sql {
  return postgres(url, {
    max,
    onnotice: () => undefined,
    transform: { undefined: null },
    connection: { application_name: 'flags' },
  });
}
