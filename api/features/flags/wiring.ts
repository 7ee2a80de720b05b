import type { ProjectAccess } from '../../auth/access';
import type { ListenerRoutes } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { OutboxWriter } from '../../lib/outbox/store';
import { AuditWriter } from '../audit/writer';
import type { ChangeGate } from '../change-requests/gate';
import { CohortStore } from '../cohorts/store';
import type { DemoFeature } from '../demo/wiring';
import { BulkFlagOperations } from './bulk';
import { bulkFlagRoutes } from './bulk-routes';
import { FlagTransfer } from './export-import';
import { flagTransferRoutes } from './export-import-routes';
import { flagRoutes } from './routes';
import { FlagService } from './service';
import { FlagStore } from './store';

export interface FlagFeature {
  /** The one mutation path for flags (routes, bulk, triggers, rollback, canary, demo writes). */
  service: FlagService;
  /** The flag routes; a public demo service's lists and writes follow the demo feature's rules. */
  routes(demo: Pick<DemoFeature, 'registry' | 'list' | 'throttle'>): ListenerRoutes;
}

/** Flags: every change commits with its audit entry and outbox event; `afterCommit` nudges the relay to publish it at once. */
export function createFlagFeature(deps: { sql: Sql; access: ProjectAccess; logger: Logger; gate: ChangeGate; afterCommit: () => void }): FlagFeature {
  const { sql, access, logger } = deps;
  const flags = new FlagService({
    sql,
    store: new FlagStore(),
    audit: new AuditWriter(),
    outbox: new OutboxWriter(),
    cohorts: new CohortStore(),
    gate: deps.gate,
    afterCommit: deps.afterCommit,
  });
  return {
    service: flags,
    routes(demo) {
      const bulk = new BulkFlagOperations({ flags, access, logger, afterDemoWrite: (written) => demo.list.apply(written) });
      const transfer = new FlagTransfer({ sql, flags, logger });
      return {
        control: [
          // Bulk and export/import first: /api/flags/bulk, /export and /import must not be taken for /api/flags/:key.
          ...bulkFlagRoutes({ bulk, demo: { isDemoService: (id) => demo.registry.isDemoService(id), throttle: demo.throttle } }),
          ...flagTransferRoutes({ transfer }),
          ...flagRoutes({ flags, access, demoList: demo.list.handle }),
        ],
      };
    },
  };
}
