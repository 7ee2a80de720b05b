import type { Queryable } from '../../infra/postgres';
import { COHORT_COLUMNS, toCohortRecord, type CohortRow } from '../cohorts/store';
import type { CohortRecord } from '../cohorts/types';
import { FLAG_COLUMNS, toFlagRecord, type FlagRow } from '../flags/store';
import type { Environment } from '../../domain/environments';
import type { FlagRecord } from '../flags/types';

export interface ServiceRow {
  id: string;
  projectId: string;
}

/** A flag's identity and version: enough to tell whether a snapshot is behind Postgres. */
export interface FlagStamp {
  id: string;
  serviceId: string;
  environment: Environment;
  key: string;
  version: number;
}

/** A cohort's identity and version: enough to tell whether a snapshot's copy is behind Postgres. */
export interface CohortStamp {
  id: string;
  projectId: string;
  version: number;
}

/** The reads behind snapshots and evaluation access; never called per evaluation of a known service. */
export class EvaluationStore {
  async allServices(db: Queryable): Promise<ServiceRow[]> {
    const rows = await db<{ id: string; project_id: string }[]>`SELECT id, project_id FROM services`;
    return rows.map((r) => ({ id: r.id, projectId: r.project_id }));
  }

  async service(db: Queryable, serviceId: string): Promise<ServiceRow | null> {
    // Postgres text cannot hold NUL: such an id names nothing (and must not become a driver error).
    if (serviceId.includes('\u0000')) return null;
    const [row] = await db<{ id: string; project_id: string }[]>`SELECT id, project_id FROM services WHERE id = ${serviceId}`;
    return row ? { id: row.id, projectId: row.project_id } : null;
  }

  async allFlags(db: Queryable): Promise<FlagRecord[]> {
    const rows = await db<FlagRow[]>`SELECT ${db.unsafe(FLAG_COLUMNS)} FROM flags`;
    return rows.map(toFlagRecord);
  }

  async flagsOfService(db: Queryable, serviceId: string): Promise<FlagRecord[]> {
    if (serviceId.includes('\u0000')) return [];
    const rows = await db<FlagRow[]>`SELECT ${db.unsafe(FLAG_COLUMNS)} FROM flags WHERE service_id = ${serviceId}`;
    return rows.map(toFlagRecord);
  }

  async flagsByIds(db: Queryable, ids: string[]): Promise<FlagRecord[]> {
    if (ids.length === 0) return [];
    const rows = await db<FlagRow[]>`SELECT ${db.unsafe(FLAG_COLUMNS)} FROM flags WHERE id = ANY(${ids})`;
    return rows.map(toFlagRecord);
  }

  async flagStamps(db: Queryable): Promise<FlagStamp[]> {
    const rows = await db<{ id: string; service_id: string; environment: Environment; key: string; version: number }[]>`
      SELECT id, service_id, environment, key, version FROM flags`;
    return rows.map((r) => ({ id: r.id, serviceId: r.service_id, environment: r.environment, key: r.key, version: r.version }));
  }

  async allCohorts(db: Queryable): Promise<CohortRecord[]> {
    const rows = await db<CohortRow[]>`SELECT ${db.unsafe(COHORT_COLUMNS)} FROM cohorts`;
    return rows.map(toCohortRecord);
  }

  async cohortsByIds(db: Queryable, ids: string[]): Promise<CohortRecord[]> {
    if (ids.length === 0) return [];
    const rows = await db<CohortRow[]>`SELECT ${db.unsafe(COHORT_COLUMNS)} FROM cohorts WHERE id = ANY(${ids})`;
    return rows.map(toCohortRecord);
  }

  async cohortStamps(db: Queryable): Promise<CohortStamp[]> {
    const rows = await db<{ id: string; project_id: string; version: number }[]>`SELECT id, project_id, version FROM cohorts`;
    return rows.map((r) => ({ id: r.id, projectId: r.project_id, version: r.version }));
  }
}
