import { isUniqueViolation } from '../../http/errors';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { Environment } from '../../domain/environments';
import type { CohortRecord, CohortRule } from './types';

/** Another cohort of the project already has this name. */
export class CohortNameTakenError extends Error {
  constructor(readonly cohortName: string) {
    super(`cohort name ${cohortName} taken`);
  }
}

export const COHORT_COLUMNS =
  'id, project_id, name, description, rules, version, created_by, updated_by, created_at, updated_at';

export interface CohortRow {
  id: string;
  project_id: string;
  name: string;
  description: string;
  rules: CohortRule[];
  version: number;
  created_by: string;
  updated_by: string;
  created_at: Date;
  updated_at: Date;
}

export const toCohortRecord = (r: CohortRow): CohortRecord => ({
  id: r.id,
  projectId: r.project_id,
  name: r.name,
  description: r.description,
  rules: r.rules,
  version: r.version,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
  createdBy: r.created_by,
  updatedBy: r.updated_by,
});

/** A flag whose targeting names a cohort (the 409 of deleting a cohort in use). */
export interface CohortUser {
  key: string;
  serviceId: string;
  environment: Environment;
}

/** Who wrote it, as the audit trail names them. */
interface Author {
  name: string;
  userId: string | null;
}

export class CohortStore {
  async list(db: Queryable, projectId: string): Promise<CohortRecord[]> {
    const rows = await db<CohortRow[]>`
      SELECT ${db.unsafe(COHORT_COLUMNS)} FROM cohorts WHERE project_id = ${projectId} ORDER BY lower(name), id`;
    return rows.map(toCohortRecord);
  }

  /** With forUpdate, the row stays locked until the transaction ends. */
  find(tx: TransactionSql, projectId: string, id: string, opts: { forUpdate: true }): Promise<CohortRecord | null>;
  find(db: Queryable, projectId: string, id: string): Promise<CohortRecord | null>;
  async find(db: Queryable, projectId: string, id: string, opts: { forUpdate?: boolean } = {}): Promise<CohortRecord | null> {
    const [row] = opts.forUpdate
      ? await db<CohortRow[]>`SELECT ${db.unsafe(COHORT_COLUMNS)} FROM cohorts WHERE id = ${id} AND project_id = ${projectId} FOR UPDATE`
      : await db<CohortRow[]>`SELECT ${db.unsafe(COHORT_COLUMNS)} FROM cohorts WHERE id = ${id} AND project_id = ${projectId}`;
    return row ? toCohortRecord(row) : null;
  }

  /**
   * The number of the project's cohorts, counted under a lock that serializes cohort creation
   * in the project until the transaction ends, so two creates cannot both pass the limit.
   */
  async countForCreate(tx: TransactionSql, projectId: string): Promise<number> {
    await tx`SELECT pg_advisory_xact_lock(hashtextextended(${`cohorts:${projectId}`}, 0))`;
    const [row] = await tx<{ n: number }[]>`SELECT count(*)::int AS n FROM cohorts WHERE project_id = ${projectId}`;
    return row.n;
  }

  async insert(db: Queryable, c: { id: string; projectId: string; name: string; description: string; rules: CohortRule[] }, author: Author): Promise<CohortRecord> {
    const [row] = await nameUnique(
      c.name,
      db<CohortRow[]>`
        INSERT INTO cohorts (id, project_id, name, description, rules, created_by, created_by_user, updated_by, updated_by_user)
        VALUES (${c.id}, ${c.projectId}, ${c.name}, ${c.description}, ${db.json(c.rules as never)}, ${author.name}, ${author.userId}, ${author.name}, ${author.userId})
        RETURNING ${db.unsafe(COHORT_COLUMNS)}`,
    );
    return toCohortRecord(row);
  }

  async update(db: Queryable, id: string, c: { name: string; description: string; rules: CohortRule[] }, author: Author): Promise<CohortRecord> {
    const [row] = await nameUnique(
      c.name,
      db<CohortRow[]>`
        UPDATE cohorts SET name = ${c.name}, description = ${c.description}, rules = ${db.json(c.rules as never)}, version = version + 1,
          updated_by = ${author.name}, updated_by_user = ${author.userId}, updated_at = now()
        WHERE id = ${id}
        RETURNING ${db.unsafe(COHORT_COLUMNS)}`,
    );
    return toCohortRecord(row);
  }

  async delete(db: Queryable, id: string): Promise<void> {
    await db`DELETE FROM cohorts WHERE id = ${id}`;
  }

  /** The project's flags (every service and environment) whose targeting has an in_cohort condition naming the cohort. */
  async flagsUsing(db: Queryable, projectId: string, cohortId: string): Promise<CohortUser[]> {
    const pattern = [{ conditions: [{ operator: 'in_cohort', value: cohortId }] }];
    const rows = await db<{ key: string; service_id: string; environment: Environment }[]>`
      SELECT key, service_id, environment FROM flags
      WHERE project_id = ${projectId} AND targeting @> ${db.json(pattern as never)}
      ORDER BY key, service_id, environment`;
    return rows.map((r) => ({ key: r.key, serviceId: r.service_id, environment: r.environment }));
  }
}

/**
 * Which of `ids` are cohorts of the project, share-locked until the transaction ends: a flag
 * write that names them keeps a concurrent delete waiting, and that delete then sees the flag.
 */
export async function lockExistingCohorts(tx: TransactionSql, projectId: string, ids: string[]): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const rows = await tx<{ id: string }[]>`
    SELECT id FROM cohorts WHERE project_id = ${projectId} AND id = ANY(${ids}) ORDER BY id FOR SHARE`;
  return new Set(rows.map((r) => r.id));
}

/** A write's rows, with the unique (project, name) violation as CohortNameTakenError. */
async function nameUnique<T>(name: string, write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    if (isUniqueViolation(error)) throw new CohortNameTakenError(name);
    throw error;
  }
}
