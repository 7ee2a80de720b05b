import type { Analytics } from '../../../analytics/client';
import type { AnyRoute } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { NotifyOrgAlertChannels } from '../alert-channels/types';
import type { FlagService } from '../flags/service';
import { FlagChangeHistory } from './changes';
import { insightRoutes } from './routes';
import { InsightsService } from './service';
import { EvaluationWarehouse } from './warehouse';

export interface InsightDeps {
  sql: Sql;
  analytics: Analytics;
  flags: FlagService;
  notifyOrgAlertChannels: NotifyOrgAlertChannels;
  logger: Logger;
}

/** Flag insights on the control plane: metrics, toggle impact, auto-rollback, stale flags, health, heatmap, alerts. */
export function createInsightRoutes(deps: InsightDeps): AnyRoute[] {
  return insightRoutes({ insights: createInsightsService(deps) });
}

/** The insights service over the warehouse and the flags' history (also the production guardrail's judge). */
export function createInsightsService(deps: InsightDeps): InsightsService {
  return new InsightsService({
    sql: deps.sql,
    warehouse: new EvaluationWarehouse(deps.analytics),
    changes: new FlagChangeHistory(deps.sql),
    flags: deps.flags,
    notifyOrgAlertChannels: deps.notifyOrgAlertChannels,
    logger: deps.logger,
  });
}
