import type { ListenerRoutes } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import { searchRoutes } from './routes';
import { FlagSearchStore } from './store';

/** The global flag search across the caller's projects (a read model over flags, services and projects). */
export function createSearchFeature(deps: { sql: Sql }): { routes: ListenerRoutes } {
  return { routes: { control: searchRoutes({ sql: deps.sql, store: new FlagSearchStore() }) } };
}
