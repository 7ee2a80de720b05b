import type { ListenerRoutes } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import type { ChangeGate } from '../change-requests/gate';
import { cohortRoutes } from './routes';
import { CohortService } from './service';
import { CohortStore } from './store';

/**
 * Cohorts (docs/cohorts.md); `afterCommit` nudges the outbox relay so snapshots hear of a change
 * at once.
 */
export function createCohortFeature(deps: { sql: Sql; gate: ChangeGate; afterCommit: () => void }): { routes: ListenerRoutes } {
  return { routes: { control: cohortRoutes({ cohorts: new CohortService({ sql: deps.sql, store: new CohortStore(), gate: deps.gate, afterCommit: deps.afterCommit }) }) } };
}
