import type { Analytics } from '../../../analytics/client';
import type { CanaryActivityDeps } from '../../../activities/canary';
import type { ListenerRoutes } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { Temporal } from '../../infra/temporal';
import type { NotifyOrgAlertChannels } from '../alert-channels/types';
import type { ChangeGate } from '../change-requests/gate';
import type { FlagService } from '../flags/service';
import type { CanaryMetrics } from '../../lib/metrics/metrics';
import type { PrometheusGuards } from '../../lib/release-safety/prometheus-guards';
import { canaryRoutes } from './routes';
import { CanaryService } from './service';
import { CanaryStore } from './store';
import { CanaryWarehouse } from './warehouse';

export interface CanaryFeatureDeps {
  sql: Sql;
  analytics: Analytics;
  temporal: Temporal;
  flags: FlagService;
  gate: ChangeGate;
  notifyOrgAlertChannels: NotifyOrgAlertChannels;
  guards: PrometheusGuards;
  /** Counted by the pipeline's activities in this process's worker. */
  metrics: CanaryMetrics;
  logger: Logger;
}

/** Canary pipelines: the control-plane routes and what this process's worker runs the pipeline's activities with. */
export function createCanaryFeature(deps: CanaryFeatureDeps): { routes: ListenerRoutes; activityDeps: CanaryActivityDeps } {
  const canaries = new CanaryService({ sql: deps.sql, store: new CanaryStore(), flags: deps.flags, gate: deps.gate, warehouse: new CanaryWarehouse(deps.analytics), guards: deps.guards, temporal: deps.temporal, logger: deps.logger });
  return {
    routes: { control: canaryRoutes({ canaries }) },
    activityDeps: { sql: deps.sql, analytics: deps.analytics, flags: deps.flags, notifyOrgAlertChannels: deps.notifyOrgAlertChannels, guards: deps.guards, metrics: deps.metrics },
  };
}
