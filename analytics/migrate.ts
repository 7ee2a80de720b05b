import fs from 'node:fs';
import path from 'node:path';
import type { Role } from '../api/config';
import { projectPath } from '../api/infra/paths';
import type { Analytics } from './client';
import { ClusterSchema } from './cluster';

const SCHEMA_DIR = projectPath('analytics', 'schema');

/**
 * Whether a process creates and migrates the analytics schema: the control plane does (and
 * `npm run migrate`); data-plane, ingest and worker processes only write, and wait for the
 * schema when it is not there yet. chDB (no CLICKHOUSE_URL) runs inside the process, so no
 * other process can reach it: there every process owns its store.
 */
export function ownsAnalyticsSchema(roles: readonly Role[], clickhouseUrl: string | undefined): boolean {
  return roles.includes('control') || !clickhouseUrl;
}

/**
 * Applies analytics/schema/NNN_*.sql in order. ClickHouse has no transactions, so every file
 * is idempotent DDL (IF NOT EXISTS) and two processes racing here both end up correct;
 * the ledger only saves work on later starts. On a cluster (analytics.cluster) each statement
 * runs in its cluster form (analytics/cluster.ts).
 */
export async function migrateAnalytics(analytics: Analytics): Promise<string[]> {
  const { client } = analytics;
  const plan = analyticsSchemaPlan(analytics.cluster);
  if (analytics.cluster) await refuseSingleNodeSchema(analytics);
  for (const statement of plan.ledger) await client.command({ query: statement });
  const rows = await client.query({ query: 'SELECT name FROM schema_migrations', format: 'JSONEachRow' });
  const applied = new Set(((await rows.json()) as { name: string }[]).map((r) => r.name));
  const ran: string[] = [];
  for (const { file, statements } of plan.files) {
    if (applied.has(file)) continue;
    for (const statement of statements) await client.command({ query: statement });
    await client.insert({ table: 'schema_migrations', values: [{ name: file }], format: 'JSONEachRow' });
    ran.push(file);
  }
  return ran;
}

/**
 * A database migrated on one node has plain tables under the names the cluster form gives its
 * Distributed tables: IF NOT EXISTS would keep them and every write would stay on this node.
 * Moving an existing database to a cluster is a copy (docs/clickhouse-cluster.md#moving-a-single-node-database).
 */
async function refuseSingleNodeSchema(analytics: Analytics): Promise<void> {
  const rs = await analytics.client.query({
    query: "SELECT engine FROM system.tables WHERE database = currentDatabase() AND name = 'schema_migrations'",
    format: 'JSONEachRow',
  });
  const [ledger] = (await rs.json()) as { engine: string }[];
  if (ledger && ledger.engine !== 'Distributed') {
    throw new Error(
      `CLICKHOUSE_CLUSTER is set but database ${analytics.database} holds a single-node schema (schema_migrations is ${ledger.engine}): ` +
        'use a new CLICKHOUSE_DATABASE and copy the data (docs/clickhouse-cluster.md#moving-a-single-node-database)',
    );
  }
}

const LEDGER = `CREATE TABLE IF NOT EXISTS schema_migrations (name String, applied_at DateTime64(3) DEFAULT now64(3))
            ENGINE = ReplacingMergeTree ORDER BY name`;

export interface AnalyticsSchemaPlan {
  /** Creates the ledger of applied files. */
  ledger: string[];
  /** Every schema file's statements as they run here, in order. */
  files: { file: string; statements: string[] }[];
  /** The table holding a table's rows, whose TTL and settings an ALTER changes. */
  storageTable(table: string): string;
  /** ` ON CLUSTER <name>` on a cluster, '' on one node. */
  onCluster: string;
}

/**
 * The statements migrateAnalytics runs: the schema files as written on one node, in their
 * cluster form with a cluster. Every file is translated, applied or not, because a later file's
 * cluster form depends on the tables the earlier ones created.
 */
export function analyticsSchemaPlan(cluster: string | undefined): AnalyticsSchemaPlan {
  const files = listSchemaFiles().map((file) => ({ file, statements: splitStatements(fs.readFileSync(path.join(SCHEMA_DIR, file), 'utf8')) }));
  if (!cluster) return { ledger: [LEDGER], files, storageTable: (table) => table, onCluster: '' };
  const schema = new ClusterSchema(cluster);
  const ledger = schema.translate(LEDGER);
  return {
    ledger,
    files: files.map(({ file, statements }) => ({ file, statements: statements.flatMap((s) => schema.translate(s)) })),
    storageTable: (table) => schema.storageTable(table),
    onCluster: ` ON CLUSTER ${cluster}`,
  };
}

export interface RetentionDays {
  /** Raw event tables (ANALYTICS_RETENTION_DAYS). */
  raw: number;
  /** Per-minute rollups and the console's own admin events (ANALYTICS_ROLLUP_RETENTION_DAYS). */
  rollup: number;
}

/**
 * Every table with a configurable retention, the expression its TTL counts from, and its class.
 * admin_events is raw but small and read as cohorts over many weeks, so it lives as long as the
 * rollups. health_probe keeps its own day. A new table with a TTL belongs here.
 */
const RETAINED_TABLES: { table: string; from: string; kind: keyof RetentionDays }[] = [
  { table: 'evaluation_events', from: 'toDateTime(timestamp)', kind: 'raw' },
  { table: 'outcome_events', from: 'toDateTime(timestamp)', kind: 'raw' },
  { table: 'sdk_telemetry', from: 'toDateTime(timestamp)', kind: 'raw' },
  { table: 'sdk_diagnostics', from: 'toDateTime(timestamp)', kind: 'raw' },
  { table: 'web_vitals', from: 'toDateTime(timestamp)', kind: 'raw' },
  { table: 'client_errors', from: 'toDateTime(timestamp)', kind: 'raw' },
  { table: 'browser_events', from: 'toDateTime(timestamp)', kind: 'raw' },
  { table: 'admin_events', from: 'toDateTime(occurred_at)', kind: 'rollup' },
  { table: 'evaluation_minutes', from: 'minute', kind: 'rollup' },
  { table: 'outcome_minutes', from: 'minute', kind: 'rollup' },
  { table: 'web_vital_minutes', from: 'minute', kind: 'rollup' },
  { table: 'browser_minutes', from: 'minute', kind: 'rollup' },
];

/**
 * Sets each table's TTL to the configured days where it differs (the schema files carry the
 * defaults, 90 and 400). Run by the schema's owner after migrateAnalytics; returns the tables
 * changed. ClickHouse then drops the expired parts in the background.
 */
export async function applyAnalyticsRetention(analytics: Analytics, days: RetentionDays): Promise<string[]> {
  const { client } = analytics;
  const plan = analyticsSchemaPlan(analytics.cluster);
  const rs = await client.query({
    query: `SELECT name, extract(engine_full, 'TTL [^+]+[+] toIntervalDay[(]([0-9]+)[)]') AS days
            FROM system.tables WHERE database = currentDatabase() AND name IN {tables:Array(String)}`,
    query_params: { tables: RETAINED_TABLES.map((t) => plan.storageTable(t.table)) },
    format: 'JSONEachRow',
  });
  const current = new Map(((await rs.json()) as { name: string; days: string }[]).map((r) => [r.name, Number(r.days)]));
  const changed: string[] = [];
  for (const { table, from, kind } of RETAINED_TABLES) {
    const wanted = days[kind];
    const storage = plan.storageTable(table);
    if (!current.has(storage) || current.get(storage) === wanted) continue;
    // Identifiers and a validated integer: nothing here comes from a request.
    await client.command({ query: `ALTER TABLE ${storage}${plan.onCluster} MODIFY TTL ${from} + INTERVAL ${Math.trunc(wanted)} DAY` });
    changed.push(table);
  }
  return changed;
}

export function listSchemaFiles(): string[] {
  return fs
    .readdirSync(SCHEMA_DIR)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort();
}

function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter(Boolean);
}
