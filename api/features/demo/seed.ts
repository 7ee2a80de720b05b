import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { writeAudit } from '../audit/writer';
import { ENVIRONMENTS } from '../../domain/environments';

/** The demo grid: 64 x 64 boolean flags `px-0` … `px-4095` (docs/api-reference.md#demo-service). */
export const DEMO_GRID_SIDE = 64;
export const DEMO_GRID_SIZE = DEMO_GRID_SIDE * DEMO_GRID_SIDE;

/**
 * Fixed ids, so a demo page can name the service without asking first and a restart finds
 * what an earlier start created.
 */
export const DEMO_SEED_IDS = { org: 'org_public_demo', project: 'prj_public_demo', service: 'svc_public_demo' } as const;
export const DEMO_SEED_ACTOR = 'system:demo-seed';

/** Any constant works; it only has to be the same in every process. */
const SEED_LOCK_KEY = 7_421_030;

export interface SeedResult {
  serviceId: string;
  /** Flags created by this call (0 when an earlier start already seeded everything). */
  created: number;
}

/**
 * Creates the demo org, project and service with the 4,096-flag grid in every environment
 * (12,288 rows), their version snapshots and one audit entry, in one transaction.
 *
 * Set-based on purpose: one INSERT … SELECT generate_series per environment (flags) feeding
 * the snapshot INSERT, instead of 12,288 FlagService transactions. Idempotent: rows that exist
 * are kept (ON CONFLICT DO NOTHING), so a restart changes nothing and a deleted cell comes back;
 * an advisory lock makes two processes starting at once take turns. Seeding publishes no flag
 * events: nothing can have read the grid before it exists.
 */
export async function seedDemoService(sql: Sql, logger: Logger): Promise<SeedResult> {
  const ids = DEMO_SEED_IDS;
  const created = await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${SEED_LOCK_KEY})`;
    await tx`INSERT INTO orgs (id, name, personal) VALUES (${ids.org}, 'Public demo', false) ON CONFLICT (id) DO NOTHING`;
    await tx`
      INSERT INTO projects (id, org_id, name, slug, description)
      VALUES (${ids.project}, ${ids.org}, 'Public demo', 'public-demo', 'Open to everyone: read, evaluate and toggle the pixel grid without signing in')
      ON CONFLICT (id) DO NOTHING`;
    await tx`
      INSERT INTO services (id, project_id, name, slug, description)
      VALUES (${ids.service}, ${ids.project}, 'Pixel grid', 'pixel-grid', ${`${DEMO_GRID_SIDE}x${DEMO_GRID_SIDE} boolean flags px-0 … px-${DEMO_GRID_SIZE - 1}`})
      ON CONFLICT (id) DO NOTHING`;
    await tx`INSERT INTO demo_services (service_id, source) VALUES (${ids.service}, 'seed') ON CONFLICT (service_id) DO NOTHING`;

    let inserted = 0;
    for (const environment of ENVIRONMENTS) {
      const [row] = await tx<{ count: number }[]>`
        WITH grid AS (
          INSERT INTO flags (id, project_id, service_id, environment, key, name, description, type, enabled, default_value,
                             tags, variants, targeting, is_public, version, created_at, updated_at)
          SELECT 'flg_' || replace(gen_random_uuid()::text, '-', ''), ${ids.project}, ${ids.service}, ${environment},
                 'px-' || n, 'px-' || n,
                 'Row ' || (n / ${DEMO_GRID_SIDE}) || ', column ' || (n % ${DEMO_GRID_SIDE}) || ' of the public demo grid',
                 'boolean', false, 'false'::jsonb, '["demo"]'::jsonb, '[]'::jsonb, '[]'::jsonb, true, 1, now(), now()
          FROM generate_series(0, ${DEMO_GRID_SIZE - 1}) AS n
          ON CONFLICT (service_id, environment, key) DO NOTHING
          RETURNING *
        ), snapshots AS (
          INSERT INTO flag_versions (id, flag_id, project_id, service_id, environment, flag_key, version, change_type, snapshot, actor, user_id, created_at)
          SELECT 'fv_' || replace(gen_random_uuid()::text, '-', ''), g.id, g.project_id, g.service_id, g.environment, g.key, 1, 'create',
                 jsonb_build_object(
                   'id', g.id, 'projectId', g.project_id, 'serviceId', g.service_id, 'environment', g.environment, 'key', g.key,
                   'name', g.name, 'description', g.description, 'type', g.type, 'enabled', g.enabled, 'defaultValue', g.default_value,
                   'tags', g.tags, 'variants', g.variants, 'targeting', g.targeting, 'isPublic', g.is_public, 'version', g.version,
                   'createdAt', to_char(g.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                   'updatedAt', to_char(g.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
                 ${DEMO_SEED_ACTOR}, NULL, now()
          FROM grid g
          RETURNING 1
        )
        SELECT count(*)::int AS count FROM snapshots`;
      inserted += row.count;
    }
    if (inserted > 0) {
      await writeAudit(
        tx,
        { name: DEMO_SEED_ACTOR, userId: null },
        {
          projectId: ids.project,
          action: 'demo.seed',
          resourceType: 'service',
          resourceId: ids.service,
          resourceName: 'pixel-grid',
          metadata: { flagsCreated: inserted, environments: [...ENVIRONMENTS], grid: `${DEMO_GRID_SIDE}x${DEMO_GRID_SIDE}` },
        },
      );
    }
    return inserted;
  });
  if (created > 0) logger.info({ serviceId: ids.service, flags: created }, 'public demo service seeded');
  return { serviceId: ids.service, created };
}
