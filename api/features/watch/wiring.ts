import type { ListenerRoutes } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import { watchRoutes } from './routes';
import { WatchService } from './service';
import { WatchStore } from './store';

/** Flag watching and the notifications it produces for the watcher. */
export function createWatchFeature(deps: { sql: Sql }): { routes: ListenerRoutes } {
  const watch = new WatchService({ sql: deps.sql, store: new WatchStore() });
  return { routes: { control: watchRoutes({ watch }) } };
}
