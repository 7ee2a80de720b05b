import { ENVIRONMENTS, type Environment } from '../../domain/environments';
import type { Queryable } from '../../infra/postgres';
import { likePattern } from '../services/store';
import type { FlagSearchResult } from './types';

interface HitRow {
  project_id: string;
  project_name: string;
  service_id: string;
  service_name: string;
  key: string;
  name: string;
  environment: Environment;
  enabled: boolean;
  version: number;
}

const prefixPattern = (term: string) => likePattern(term).slice(1);

/**
 * Flags of the given projects whose key or name holds `term`, one result per (service, key) with
 * every environment's state. An exact key first, then key prefixes, name prefixes, the rest; ties
 * by key.
 */
export class FlagSearchStore {
  async search(db: Queryable, projectIds: string[], term: string, limit: number): Promise<FlagSearchResult[]> {
    if (!projectIds.length) return [];
    const anywhere = likePattern(term);
    const prefix = prefixPattern(term);
    const rows = await db<HitRow[]>`
      WITH hits AS (
        SELECT service_id, key,
               MIN(CASE WHEN lower(key) = lower(${term}::text) THEN 0 WHEN key ILIKE ${prefix} THEN 1 WHEN name ILIKE ${prefix} THEN 2 ELSE 3 END) AS rank
        FROM flags
        WHERE project_id IN ${db(projectIds)} AND (key ILIKE ${anywhere} OR name ILIKE ${anywhere})
        GROUP BY service_id, key
        ORDER BY rank, key, service_id
        LIMIT ${limit}
      )
      SELECT f.project_id, p.name AS project_name, f.service_id, s.name AS service_name, f.key, f.name, f.environment, f.enabled, f.version
      FROM hits h
      JOIN flags f ON f.service_id = h.service_id AND f.key = h.key
      JOIN services s ON s.id = f.service_id
      JOIN projects p ON p.id = f.project_id
      ORDER BY h.rank, h.key, h.service_id`;
    const results = new Map<string, FlagSearchResult>();
    for (const row of rows) {
      const id = `${row.service_id}\u0000${row.key}`;
      let result = results.get(id);
      if (!result) {
        result = { projectId: row.project_id, projectName: row.project_name, serviceId: row.service_id, serviceName: row.service_name, key: row.key, name: row.name, environments: [] };
        results.set(id, result);
      }
      result.environments.push({ environment: row.environment, enabled: row.enabled, version: row.version });
    }
    for (const result of results.values()) result.environments.sort((a, b) => ENVIRONMENTS.indexOf(a.environment) - ENVIRONMENTS.indexOf(b.environment));
    return [...results.values()];
  }
}
