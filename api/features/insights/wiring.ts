import type { Analytics } from '../../../analytics/client';
import type { ListenerRoutes } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { NotifyOrgAlertChannels } from '../alert-channels/types';
import type { FlagService } from '../flags/service';
import { FlagChangeHistory } from './changes';
import { insightRoutes } from './routes';
import { InsightsService } from './service';
import { EvaluationWarehouse } from './warehouse';

export interface InsightFeature {
  routes: ListenerRoutes;
  /** Also the production guardrail's judge. */
  insights: InsightsService;
}

/** Flag insights over the warehouse and the flags' history: metrics, toggle impact, auto-rollback, stale flags, health, heatmap, alerts. */
export function createInsightFeature(deps: { sql: Sql; analytics: Analytics; flags: FlagService; notifyOrgAlertChannels: NotifyOrgAlertChannels; logger: Logger }): InsightFeature {
  const insights = new InsightsService({
    sql: deps.sql,
    warehouse: new EvaluationWarehouse(deps.analytics),
    changes: new FlagChangeHistory(),
    flags: deps.flags,
    notifyOrgAlertChannels: deps.notifyOrgAlertChannels,
    logger: deps.logger,
  });
  return { routes: { control: insightRoutes({ insights }) }, insights };
}
