import fs from 'node:fs';
import { Readable } from 'node:stream';
import { createClient, parseError, type ClickHouseClient } from '@clickhouse/client';
import { ClusterSchema, clusterClientSettings } from './cluster';

export type { ClickHouseClient };

export interface Analytics {
  client: ClickHouseClient;
  backend: 'clickhouse' | 'chdb';
  database: string;
  /** The ClickHouse cluster the schema is placed on (CLICKHOUSE_CLUSTER, docs/clickhouse-cluster.md); one node when absent. */
  cluster?: string;
  /** The batched writer's way in (analytics/writer.ts): rows as TabSeparated bytes, never one string. */
  insertTabSeparated(insert: TabSeparatedInsert): Promise<void>;
  close(): Promise<void>;
}

export interface TabSeparatedInsert {
  table: string;
  columns: [string, ...string[]];
  /** Whole lines, newline included. */
  chunks: readonly Buffer[];
  settings: Record<string, string | number>;
}

/**
 * One @clickhouse/client for both profiles: a ClickHouse server when CLICKHOUSE_URL is set,
 * otherwise chDB in-process through its Connection plug-in. Queries are identical.
 * chDB allows one data path per process; several sessions on that path (several platforms in
 * one test process) each keep their own current database.
 */
export async function openAnalytics(opts: {
  url?: string;
  database: string;
  chdbPath: string;
  /** A cluster named in the server's remote_servers: the schema goes on every node (analytics/cluster.ts). */
  cluster?: string;
  /** False in processes that only write (ownsAnalyticsSchema); scripts and tests own what they open. */
  ownsSchema?: boolean;
}): Promise<Analytics> {
  if (opts.url) {
    // On a server the database is schema too: only its owner creates it.
    if (opts.ownsSchema ?? true) {
      const bootstrap = createClient({ url: opts.url });
      const create = opts.cluster ? new ClusterSchema(opts.cluster).createDatabase(opts.database) : `CREATE DATABASE IF NOT EXISTS ${opts.database}`;
      await bootstrap.command({ query: create });
      await bootstrap.close();
    }
    const client = createClient({
      url: opts.url,
      database: opts.database,
      clickhouse_settings: { date_time_input_format: 'best_effort', ...(opts.cluster ? clusterClientSettings : {}) },
    });
    const insertTabSeparated = async ({ table, columns, chunks, settings }: TabSeparatedInsert) => {
      await client.insert({ table, columns, values: Readable.from(chunks, { objectMode: false }), format: 'TabSeparated', clickhouse_settings: settings });
    };
    return { client, backend: 'clickhouse', database: opts.database, cluster: opts.cluster, insertTabSeparated, close: () => client.close() };
  }
  if (opts.cluster) throw new Error('A ClickHouse cluster needs CLICKHOUSE_URL: chDB is one node in this process');
  const [{ Session }, { createChdbConnection }] = await Promise.all([import('chdb'), import('chdb/connection')]);
  fs.mkdirSync(opts.chdbPath, { recursive: true });
  // The engine starts with the first session at its path, with that session's arguments, and the
  // connection's session shares it. Its memory worker reads the cgroup's memory statistics every
  // 50 ms by default, 0.2% of a core with nothing to do; every 2 s is plenty for an engine that
  // takes a batch every few seconds (docs/operations.md#resource-use-at-idle).
  const engine = new Session(opts.chdbPath, { connectionArgs: ['--memory_worker_period_ms=2000'] });
  const connection = createChdbConnection({ path: opts.chdbPath });
  const client = createClient({ connection } as Parameters<typeof createClient>[0]);
  // chDB lives in this process alone, which therefore owns its schema (ownsAnalyticsSchema).
  await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${opts.database}` });
  // The chDB connection ignores the `database` option; its session keeps USE instead, so
  // queries can name tables unqualified exactly as they do against a server.
  await client.command({ query: `USE ${opts.database}` });
  // The client's insert would decode the bytes into a string, add the statement to it and encode it
  // again (about a fifth of chDB's cost per row of evaluation events); the raw insert hands the engine
  // the bytes as they are, with the settings in the statement (not SET on the shared session).
  const insertTabSeparated = async ({ table, columns, chunks, settings }: TabSeparatedInsert) => {
    try {
      await connection.chdb.rawInsert({ table, columns, values: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), format: 'TabSeparated', settings });
    } catch (error) {
      // The client's error shape (type: 'UNKNOWN_TABLE' and so on), as its insert would throw.
      throw parseError((error as Error).message ?? String(error));
    }
  };
  const close = async () => {
    await client.close();
    engine.close();
  };
  return { client, backend: 'chdb', database: opts.database, insertTabSeparated, close };
}
