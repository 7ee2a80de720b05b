import fs from 'node:fs';
import type { Sql } from './postgres';
import { projectPath } from './paths';

const MIGRATIONS_DIR = projectPath('migrations');
/** Any constant works; it only has to be the same in every process. */
const MIGRATION_LOCK_KEY = 7_421_001;

export function listMigrations(): string[] {
  return fs
    .readdirSync(MIGRATIONS_DIR)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort();
}

/**
 * Applies migrations/NNNN_*.sql in order, each in its own transaction together with its
 * ledger row. A transaction-scoped advisory lock serialises concurrent migrators: the second
 * process waits, then sees the ledger row and skips.
 */
export async function migrate(sql: Sql): Promise<string[]> {
  await sql`CREATE TABLE IF NOT EXISTS schema_migrations (
    name text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`.catch(async (error: { code?: string }) => {
    // Two processes creating the ledger at once: the loser sees a unique violation, the table
    // (42P07), or its row type (42710: 'type "schema_migrations" already exists') already there.
    if (error.code !== '23505' && error.code !== '42P07' && error.code !== '42710') throw error;
  });
  const ran: string[] = [];
  for (const file of listMigrations()) {
    const applied = await sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`;
      const [done] = await tx`SELECT 1 FROM schema_migrations WHERE name = ${file}`;
      if (done) return false;
      await tx.unsafe(fs.readFileSync(`${MIGRATIONS_DIR}/${file}`, 'utf8'));
      await tx`INSERT INTO schema_migrations (name) VALUES (${file})`;
      return true;
    });
    if (applied) ran.push(file);
  }
  return ran;
}
