import { RateLimiter } from '../../http/rate-limit';
import type { ListenerRoutes } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Sql } from '../../infra/postgres';
import type { FlagService } from '../flags/service';
import { triggerRoutes } from './routes';
import { TriggerService } from './service';
import { TriggerStore } from './store';
import { TRIGGER_RATE_WINDOW_SECONDS } from './types';

/** Flag triggers, applied through the one flag mutation path. */
export function createTriggerFeature(deps: { sql: Sql; cache: Cache; flags: FlagService; publicBaseUrl: string }): { routes: ListenerRoutes } {
  const triggers = new TriggerService({
    sql: deps.sql,
    store: new TriggerStore(),
    flags: deps.flags,
    // Its own one-minute window in the shared cache, so every replica counts against one budget.
    limiter: new RateLimiter(deps.cache, TRIGGER_RATE_WINDOW_SECONDS),
    publicBaseUrl: deps.publicBaseUrl,
  });
  return { routes: { control: triggerRoutes({ triggers }) } };
}
