import fs from 'node:fs';
import { createClient, type ClickHouseClient } from '@clickhouse/client';

export type { ClickHouseClient };

export interface Analytics {
  client: ClickHouseClient;
  backend: 'clickhouse' | 'chdb';
  database: string;
  close(): Promise<void>;
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
  /** False in processes that only write (ownsAnalyticsSchema); scripts and tests own what they open. */
  ownsSchema?: boolean;
}): Promise<Analytics> {
  if (opts.url) {
    // On a server the database is schema too: only its owner creates it.
    if (opts.ownsSchema ?? true) {
      const bootstrap = createClient({ url: opts.url });
      await bootstrap.command({ query: `CREATE DATABASE IF NOT EXISTS ${opts.database}` });
      await bootstrap.close();
    }
    const client = createClient({
      url: opts.url,
      database: opts.database,
      clickhouse_settings: { date_time_input_format: 'best_effort' },
    });
    return { client, backend: 'clickhouse', database: opts.database, close: () => client.close() };
  }
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
  const close = async () => {
    await client.close();
    engine.close();
  };
  return { client, backend: 'chdb', database: opts.database, close };
}
