import type { Analytics } from '../../../analytics/client';
import type { BanditActivityDeps } from '../../../activities/bandit';
import type { ListenerRoutes } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { Temporal } from '../../infra/temporal';
import type { FlagService } from '../flags/service';
import { BanditReallocator } from './reallocation';
import { experimentRoutes } from './routes';
import { BanditService } from './service';
import { BanditStore } from './store';
import { BanditWarehouse } from './warehouse';

export interface ExperimentFeatureDeps {
  sql: Sql;
  analytics: Analytics;
  temporal: Temporal;
  flags: FlagService;
  logger: Logger;
}

/** Bandit experiments: the control-plane routes and what this process's worker runs the reallocation activity with. */
export function createExperimentFeature(deps: ExperimentFeatureDeps): { routes: ListenerRoutes; activityDeps: BanditActivityDeps } {
  const store = new BanditStore();
  const reallocator = new BanditReallocator({ sql: deps.sql, store, flags: deps.flags, warehouse: new BanditWarehouse(deps.analytics) });
  const experiments = new BanditService({ sql: deps.sql, store, flags: deps.flags, reallocator, temporal: deps.temporal, logger: deps.logger });
  return {
    routes: { control: experimentRoutes({ experiments, projectOf: (id) => store.projectOf(deps.sql, id) }) },
    activityDeps: { reallocator },
  };
}
