import type { ProjectAccess } from '../../auth/access';
import type { ListenerRoutes } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import { ProjectStore } from '../projects/store';
import { auditRoutes } from './routes';
import { AuditStore } from './store';

/** Reading the audit trail (every mutation writes its entry through audit/writer.ts in its own transaction). */
export function createAuditFeature(deps: { sql: Sql; access: ProjectAccess }): { routes: ListenerRoutes } {
  return { routes: { control: auditRoutes({ ...deps, audit: new AuditStore(), projects: new ProjectStore() }) } };
}
