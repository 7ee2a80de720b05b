/**
 * `npm run bench:flag-writes`: the flag write path (api/features/flags/service.ts) against the
 * Postgres of DATABASE_URL (e.g. after `source scripts/test-infra.sh up`), in a database of its
 * own that is dropped at the end.
 *
 *   1. batch toggle of 10,000 flags (FlagService.setEnabledMany, one transaction)
 *   2. batch toggle of 4,096 flags (the demo grid's bulk write)
 *   3. single toggles, one after the other (FlagService.toggle, one transaction each)
 *
 * Each batch flips every flag, so every flag is written (row, version, audit entry, outbox
 * event). BENCH_ROUNDS (default 5) rounds per batch size, the median and best are reported; BENCH_SINGLES
 * (default 500) single toggles. The machine's noise shows in the spread: compare the best rounds
 * of interleaved runs when judging a change.
 */
import postgres from 'postgres';
import { AuditWriter } from '../api/features/audit/writer';
import { CohortStore } from '../api/features/cohorts/store';
import { ChangeGate } from '../api/features/change-requests/gate';
import { FlagService } from '../api/features/flags/service';
import { createLogger } from '../api/infra/logger';
import { FlagStore } from '../api/features/flags/store';
import { OutboxWriter } from '../api/lib/outbox/store';
import { migrate } from '../api/infra/migrate';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SINGLES = Number(process.env.BENCH_SINGLES ?? 500);
const actor = { name: 'bench', userId: null };

async function main() {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: run `source scripts/test-infra.sh up` first');
  const database = `bench_flag_writes_${process.pid}`;
  const admin = postgres(url, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`CREATE DATABASE ${database}`);
  const target = new URL(url);
  target.pathname = `/${database}`;
  const sql = postgres(target.toString(), { max: 4, onnotice: () => undefined });
  try {
    await migrate(sql);
    await sql`INSERT INTO orgs (id, name) VALUES ('org_bench', 'Bench')`;
    await sql`INSERT INTO projects (id, org_id, name, slug) VALUES ('prj_bench', 'org_bench', 'Bench', 'bench')`;
    const flags = new FlagService({ sql, store: new FlagStore(), audit: new AuditWriter(), outbox: new OutboxWriter(), cohorts: new CohortStore(), gate: new ChangeGate({ sql, logger: createLogger('silent') }) });

    for (const size of [10_000, 4_096]) {
      const serviceId = await seedService(sql, size);
      const keys = Array.from({ length: size }, (_, n) => `f-${n}`);
      const times: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const started = performance.now();
        const result = await flags.setEnabledMany(actor, { serviceId, environment: 'development' }, keys.map((key) => ({ key, enabled: round % 2 === 0 })));
        times.push(performance.now() - started);
        if (result.size !== size) throw new Error(`expected ${size} flags, got ${result.size}`);
      }
      console.log(`batch toggle of ${size} flags: median ${median(times).toFixed(0)} ms, best ${Math.min(...times).toFixed(0)} ms (rounds: ${times.map((t) => t.toFixed(0)).join(', ')})`);
    }

    const serviceId = await seedService(sql, 1);
    const started = performance.now();
    for (let i = 0; i < SINGLES; i++) await flags.toggle(actor, { serviceId, environment: 'development', key: 'f-0' });
    console.log(`single toggle: ${((performance.now() - started) / SINGLES).toFixed(2)} ms each (${SINGLES} in a row)`);
  } finally {
    await sql.end();
    await admin.unsafe(`DROP DATABASE IF EXISTS ${database}`);
    await admin.end();
  }
}

/** A service with `size` disabled boolean flags f-0 … f-(size-1) in development. */
async function seedService(sql: postgres.Sql, size: number): Promise<string> {
  const serviceId = `svc_bench_${size}`;
  await sql`INSERT INTO services (id, project_id, name, slug) VALUES (${serviceId}, 'prj_bench', ${serviceId}, ${serviceId})`;
  await sql`
    INSERT INTO flags (id, project_id, service_id, environment, key, name, description, type, enabled, default_value,
                       tags, variants, targeting, is_public, version, created_at, updated_at)
    SELECT 'flg_' || replace(gen_random_uuid()::text, '-', ''), 'prj_bench', ${serviceId}, 'development', 'f-' || n, 'f-' || n,
           'bench flag ' || n, 'boolean', false, 'false'::jsonb, '["bench"]'::jsonb, '[]'::jsonb, '[]'::jsonb, false, 1, now(), now()
    FROM generate_series(0, ${size - 1}) AS n`;
  return serviceId;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
