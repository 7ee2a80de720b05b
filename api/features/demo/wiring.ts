import type { Config } from '../../config';
import type { ListenerRoutes } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { FlagService } from '../flags/service';
import { ENVIRONMENTS } from '../../domain/environments';
import { DemoFlagList } from './list';
import { DemoServiceRegistry } from './registry';
import { demoRoutes } from './routes';
import { seedDemoService } from './seed';
import { DemoWriteThrottle } from './throttle';

export interface DemoFeature {
  /** Which services are demo services: `platform.demo` (evaluation, streams, bulk, list). */
  registry: DemoServiceRegistry;
  /** The demo case of GET /api/flags (passed to the flags routes). */
  list: DemoFlagList;
  throttle: DemoWriteThrottle;
  routes: ListenerRoutes;
  stop(): Promise<void>;
}

/**
 * The public demo service (docs/api-reference.md#demo-service): seeds the 4,096-flag grid when
 * configured to (DEMO_SEED, default on the embedded profile), loads the demo registry and, where
 * the flags list is served (the control role), starts the demo list cache's invalidation from the bus.
 */
export async function createDemoFeature(deps: { config: Config; sql: Sql; cache: Cache; logger: Logger; flags: FlagService }): Promise<DemoFeature> {
  const { config, sql, cache, logger } = deps;
  if (config.DEMO_SEED ?? config.embedded) await seedDemoService(sql, logger);
  const registry = new DemoServiceRegistry({ sql, logger, configured: config.DEMO_SERVICE_IDS });
  await registry.start();
  const list = new DemoFlagList({ sql, flags: deps.flags, registry, cache, logger });
  // The list is asked only by GET /api/flags, a control-listener route: a data-plane process
  // would hold a second copy of the grid (4,096 flags in each environment) in its heap for
  // nothing, and every old-generation collection there would mark it again.
  if (config.ROLES.includes('control')) {
    try {
      await list.start();
    } catch (error) {
      registry.stop();
      throw error;
    }
    list.warmUp(ENVIRONMENTS);
  }
  return {
    registry,
    list,
    throttle: new DemoWriteThrottle(cache),
    routes: { control: demoRoutes({ registry }) },
    async stop() {
      registry.stop();
      await list.stop();
    },
  };
}
