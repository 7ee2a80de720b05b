import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import type { Logger } from './logger';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;

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
  const { PGlite } = await import('@electric-sql/pglite');
  const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
  const dir = path.join(opts.dataDir, 'pglite');
  fs.mkdirSync(dir, { recursive: true });
  const db = await PGlite.create(dir);
  const server = new PGLiteSocketServer({ db, port: 0, host: '127.0.0.1' });
  await server.start();
  const hostPort = server.getServerConn();
  const url = `postgres://postgres@${hostPort}/postgres`;
  opts.logger.info({ address: hostPort }, 'embedded PGlite serving the Postgres protocol');
  const sql = connect(url, 1);
  return {
    sql,
    backend: 'pglite',
    url,
    async close() {
      await sql.end({ timeout: 5 });
      await server.stop();
      await db.close();
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
