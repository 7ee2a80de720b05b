import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { Temporal } from '../../infra/temporal';
import type { NotifyOrgAlertChannels } from '../alert-channels/types';
import type { InsightsService } from '../insights/service';
import { GuardrailChecker } from './checker';
import { GuardrailConsumer } from './consumer';
import type { PrometheusGuards } from '../../lib/release-safety/prometheus-guards';

export interface GuardrailDeps {
  sql: Sql;
  temporal: Temporal;
  insights: InsightsService;
  notifyOrgAlertChannels: NotifyOrgAlertChannels;
  guards: PrometheusGuards;
  logger: Logger;
}

/**
 * The automatic guardrail after production changes (docs/guardrails.md): the outbox consumer that
 * starts a watch per change (control plane) and the check the watch's activity runs (worker).
 */
export function createGuardrailFeature(deps: GuardrailDeps): { consumer: GuardrailConsumer; checker: GuardrailChecker } {
  return {
    consumer: new GuardrailConsumer({ sql: deps.sql, temporal: deps.temporal }),
    checker: new GuardrailChecker({ sql: deps.sql, insights: deps.insights, notifyOrgAlertChannels: deps.notifyOrgAlertChannels, guards: deps.guards, logger: deps.logger }),
  };
}
