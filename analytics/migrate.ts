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
