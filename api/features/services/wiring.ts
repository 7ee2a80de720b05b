import type { ListenerRoutes } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import { serviceRoutes } from './routes';
import { ServiceService } from './service';
import { ServiceStore } from './store';

/** The services of a project (each holds flags per environment). */
export function createServiceFeature(deps: { sql: Sql }): { routes: ListenerRoutes } {
  const services = new ServiceService({ sql: deps.sql, store: new ServiceStore() });
  return { routes: { control: serviceRoutes({ services }) } };
}
