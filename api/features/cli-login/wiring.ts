import type { ListenerRoutes } from '../../http/route';
import { cliLoginRoutes, type CliLoginDeps } from './routes';

/** The CLI login flow: a signed-in browser approves, the CLI receives a personal token. */
export function createCliLoginFeature(deps: CliLoginDeps): { routes: ListenerRoutes } {
  return { routes: { control: cliLoginRoutes(deps) } };
}
