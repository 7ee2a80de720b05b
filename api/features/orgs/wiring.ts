import type { ListenerRoutes } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import { orgRoutes } from './routes';

/** Organizations: every user owns a personal one; projects belong to one. */
export function createOrgFeature(deps: { sql: Sql }): { routes: ListenerRoutes } {
  return { routes: { control: orgRoutes(deps) } };
}
