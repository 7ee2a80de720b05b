/**
 * The analytics schema on a replicated, sharded ClickHouse cluster (CLICKHOUSE_CLUSTER,
 * docs/clickhouse-cluster.md). The schema files (analytics/schema) are written for one node; this
 * module derives each statement's cluster form, so there is one schema and two placements:
 *
 * - a table `t` becomes `t_local` on every node (`Replicated*MergeTree`, one replica set per shard)
 *   and `t` itself a `Distributed` table over them, so every writer and reader keeps naming `t`;
 * - a materialized view reads and writes the local tables: each shard rolls up the rows it stores,
 *   and a read through the Distributed rollup merges the shards' partial aggregates, so counts,
 *   sums, quantile and uniq states stay exact;
 * - a landing table (`ENGINE = Null`: rows arrive there only to be reshaped by its view) is on
 *   every node as it is, and its view writes through the Distributed table, so the rows it makes
 *   are spread by that table's sharding key as if they had been inserted there;
 * - every statement runs `ON CLUSTER`.
 *
 * A statement of a shape not listed here is refused rather than guessed at; the unit tests
 * translate every schema file, so a new file that needs a new shape fails there first.
 */

/** Tables kept on each node alone: the health probe checks the node it talks to. */
const NODE_LOCAL_TABLES = new Set(['health_probe']);

/**
 * How each written table spreads its rows over the shards. Deterministic, so a retried insert
 * splits into the same blocks and each shard's replicated deduplication drops the repeat; even for
 * one hot flag or anonymous traffic. No query relies on where a row lives (joins and IN run as
 * GLOBAL: see clusterClientSettings), except recent_contexts, whose ReplacingMergeTree collapses
 * a key's rows only when they share a shard. Rollups have none: only their views write them.
 */
const SHARDING_KEYS: Record<string, string> = {
  schema_migrations: 'cityHash64(name)',
  evaluation_events: 'cityHash64(targeting_key_hash, flag_key, timestamp)',
  outcome_events: 'cityHash64(event_id)',
  sdk_telemetry: 'cityHash64(event_id)',
  sdk_diagnostics: 'cityHash64(event_id)',
  web_vitals: 'cityHash64(event_id)',
  client_errors: 'cityHash64(event_id)',
  browser_events: 'cityHash64(event_id)',
  admin_events: 'cityHash64(event_id)',
  recent_contexts: 'cityHash64(service_id, environment, targeting_key)',
};

/** Settings every query of a cluster-mode client carries (analytics/client.ts). */
export const clusterClientSettings = {
  // Joins and IN over Distributed tables read the whole right side (GLOBAL), which is exact
  // wherever the rows live; the default refuses such queries.
  distributed_product_mode: 'global',
  // An insert into a Distributed table answers once the shards stored it, not when it is queued
  // on the node's disk: an accepted batch is durable where it will be read.
  insert_distributed_sync: 1,
} as const;

export const localTableName = (table: string): string => `${table}_local`;

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function assertClusterName(cluster: string): void {
  if (!IDENTIFIER.test(cluster)) throw new Error(`CLICKHOUSE_CLUSTER must be a plain identifier, got ${JSON.stringify(cluster)}`);
}

/**
 * Translates the schema's statements, in order, into their cluster form. Stateful: which tables
 * were split into local and Distributed halves is learned from the CREATE TABLEs, so feed it every
 * statement of every file in order, including files already applied (analytics/migrate.ts).
 */
export class ClusterSchema {
  private readonly distributed = new Set<string>();
  private readonly landing = new Set<string>();

  constructor(private readonly cluster: string) {
    assertClusterName(cluster);
  }

  /** The database itself, created on every node. */
  createDatabase(database: string): string {
    return `CREATE DATABASE IF NOT EXISTS ${database} ON CLUSTER ${this.cluster}`;
  }

  /** The table whose storage a per-table ALTER (a TTL, a setting) changes. */
  storageTable(table: string): string {
    return this.distributed.has(table) ? localTableName(table) : table;
  }

  /** The cluster form of one statement of a schema file: one or more statements. */
  translate(statement: string): string[] {
    const text = statement.trim();
    const table = /^CREATE TABLE IF NOT EXISTS (\w+)\s*\(([\s\S]*?)\)\s*ENGINE\s*=\s*(\w*MergeTree)(?:\(([^)]*)\))?([\s\S]*)$/.exec(text);
    if (table) return this.createTable(table[1]!, table[2]!, table[3]!, table[4] ?? '', table[5]!);
    const landing = /^CREATE TABLE IF NOT EXISTS (\w+)\s*\(([\s\S]*?)\)\s*ENGINE\s*=\s*Null$/.exec(text);
    if (landing) {
      this.landing.add(landing[1]!);
      return [`CREATE TABLE IF NOT EXISTS ${landing[1]} ON CLUSTER ${this.cluster} (${landing[2]}) ENGINE = Null`];
    }
    const view = /^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+) TO (\w+) AS([\s\S]*)$/.exec(text);
    if (view) {
      const [, name, target, select] = view;
      const fromLanding = /\bFROM\s+(\w+)/.exec(select!)?.[1];
      const into = fromLanding !== undefined && this.landing.has(fromLanding) ? target! : this.storageTable(target!);
      return [`CREATE MATERIALIZED VIEW IF NOT EXISTS ${name} ON CLUSTER ${this.cluster} TO ${into} AS${this.readLocal(select!)}`];
    }
    const drop = /^DROP (VIEW|TABLE) IF EXISTS (\w+)$/.exec(text);
    if (drop) return [`DROP ${drop[1]} IF EXISTS ${drop[2]} ON CLUSTER ${this.cluster}`];
    const alter = /^ALTER TABLE (\w+) ((ADD|DROP|MODIFY|COMMENT) (COLUMN|SETTING|TTL)\b[\s\S]*)$/.exec(text);
    if (alter) return this.alter(alter[1]!, alter[2]!, alter[4]!);
    throw new Error(`No cluster form for this statement (analytics/cluster.ts): ${text.slice(0, 120)}`);
  }

  private createTable(name: string, columns: string, engine: string, engineArgs: string, rest: string): string[] {
    const replicated = `Replicated${engine}('/clickhouse/tables/{shard}/{database}/{table}', '{replica}'${engineArgs.trim() ? `, ${engineArgs.trim()}` : ''})`;
    const settings = rest.replace(/\bnon_replicated_deduplication_window\b/g, 'replicated_deduplication_window');
    if (NODE_LOCAL_TABLES.has(name)) {
      return [`CREATE TABLE IF NOT EXISTS ${name} ON CLUSTER ${this.cluster} (${columns}) ENGINE = ${engine}${engineArgs ? `(${engineArgs})` : ''}${settings}`];
    }
    this.distributed.add(name);
    const local = localTableName(name);
    const key = SHARDING_KEYS[name];
    return [
      `CREATE TABLE IF NOT EXISTS ${local} ON CLUSTER ${this.cluster} (${columns}) ENGINE = ${replicated}${settings}`,
      `CREATE TABLE IF NOT EXISTS ${name} ON CLUSTER ${this.cluster} AS ${local} ENGINE = Distributed('${this.cluster}', currentDatabase(), ${local}${key ? `, ${key}` : ''})`,
    ];
  }

  /** A view's query reads the local half of every split table it names. */
  private readLocal(select: string): string {
    return select.replace(/\b(FROM|JOIN)(\s+)(\w+)\b/g, (whole, keyword: string, space: string, source: string) =>
      this.distributed.has(source) ? `${keyword}${space}${localTableName(source)}` : whole,
    );
  }

  private alter(name: string, action: string, object: string): string[] {
    const onCluster = (target: string, text: string) => `ALTER TABLE ${target} ON CLUSTER ${this.cluster} ${text}`;
    if (!this.distributed.has(name)) return [onCluster(name, action)];
    const local = localTableName(name);
    // Storage settings and TTLs live on the replicated tables; a Distributed table has neither.
    if (object === 'SETTING' || object === 'TTL') {
      return [onCluster(local, action.replace(/\bnon_replicated_deduplication_window\b/g, 'replicated_deduplication_window'))];
    }
    // Columns: the local tables first, so the Distributed table never names a column they lack.
    return [onCluster(local, action), onCluster(name, action)];
  }
}
