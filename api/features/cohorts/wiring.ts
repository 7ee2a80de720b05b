import type { AnyRoute } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import { cohortRoutes } from './routes';
import { CohortService } from './service';
import { CohortStore } from './store';

/**
 * Cohort routes (docs/cohorts.md); `afterCommit` nudges the outbox relay so snapshots hear of a
 * change at once.
 */
export function cohortFeatureRoutes(deps: { sql: Sql; afterCommit: () => void }): AnyRoute[] {
  return cohortRoutes({ cohorts: new CohortService({ sql: deps.sql, store: new CohortStore(), afterCommit: deps.afterCommit }) });
}
