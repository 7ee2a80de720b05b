import type { ProjectAccess } from '../../auth/access';
import type { AnyRoute } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { BulkFlagOperations } from './bulk';
import { bulkFlagRoutes, type BulkDemoPolicy } from './bulk-routes';
import { FlagTransfer } from './export-import';
import { flagTransferRoutes } from './export-import-routes';
import type { FlagService } from './service';
import type { FlagRecord } from './types';

export interface FlagBatchDeps {
  sql: Sql;
  flags: FlagService;
  access: ProjectAccess;
  logger: Logger;
  demo: {
    registry: { isDemoService(serviceId: string): boolean };
    throttle: BulkDemoPolicy['throttle'];
    list: { apply(flags: FlagRecord[]): void };
  };
}

/**
 * Bulk create/update/delete and export/import (docs/api-reference.md#flags), built on FlagService.
 * Their fixed paths (/api/flags/bulk, /export, /import) must win over /api/flags/:key: list these
 * routes before flagRoutes (mountRoutes also ranks fixed segments first).
 */
export function flagBatchRoutes(deps: FlagBatchDeps): AnyRoute[] {
  const bulk = new BulkFlagOperations({
    flags: deps.flags,
    access: deps.access,
    logger: deps.logger,
    afterDemoWrite: (flags) => deps.demo.list.apply(flags),
  });
  const transfer = new FlagTransfer({ sql: deps.sql, flags: deps.flags, logger: deps.logger });
  return [
    ...bulkFlagRoutes({ bulk, demo: { isDemoService: (id) => deps.demo.registry.isDemoService(id), throttle: deps.demo.throttle } }),
    ...flagTransferRoutes({ transfer }),
  ];
}
