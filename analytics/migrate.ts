import fs from 'node:fs';
import path from 'node:path';
import type { Role } from '../api/config';
import { projectPath } from '../api/infra/paths';
import type { Analytics } from './client';

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
 * the ledger only saves work on later starts.
 */
export async function migrateAnalytics(analytics: Analytics): Promise<string[]> {
  const { client } = analytics;
  await client.command({
    query: `CREATE TABLE IF NOT EXISTS schema_migrations (name String, applied_at DateTime64(3) DEFAULT now64(3))
            ENGINE = ReplacingMergeTree ORDER BY name`,
  });
  const rows = await client.query({ query: 'SELECT name FROM schema_migrations', format: 'JSONEachRow' });
  const applied = new Set(((await rows.json()) as { name: string }[]).map((r) => r.name));
  const files = listSchemaFiles();
  const ran: string[] = [];
  for (const file of files) {
    if (applied.has(file)) continue;
    const text = fs.readFileSync(path.join(SCHEMA_DIR, file), 'utf8');
    for (const statement of splitStatements(text)) await client.command({ query: statement });
    await client.insert({ table: 'schema_migrations', values: [{ name: file }], format: 'JSONEachRow' });
    ran.push(file);
  }
  return ran;
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
  const rs = await client.query({
    query: `SELECT name, extract(engine_full, 'TTL [^+]+[+] toIntervalDay[(]([0-9]+)[)]') AS days
            FROM system.tables WHERE database = currentDatabase() AND name IN {tables:Array(String)}`,
    query_params: { tables: RETAINED_TABLES.map((t) => t.table) },
    format: 'JSONEachRow',
  });
  const current = new Map(((await rs.json()) as { name: string; days: string }[]).map((r) => [r.name, Number(r.days)]));
  const changed: string[] = [];
  for (const { table, from, kind } of RETAINED_TABLES) {
    const wanted = days[kind];
    if (!current.has(table) || current.get(table) === wanted) continue;
    // Identifiers and a validated integer: nothing here comes from a request.
    await client.command({ query: `ALTER TABLE ${table} MODIFY TTL ${from} + INTERVAL ${Math.trunc(wanted)} DAY` });
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
