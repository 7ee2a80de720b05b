import type { ProjectAccess } from '../../auth/access';
import type { ListenerRoutes } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import { memberRoutes } from './routes';
import { MemberService } from './service';
import { MemberStore } from './store';

/** Project membership: list, change roles, remove, leave. */
export function createMemberFeature(deps: { sql: Sql; access: ProjectAccess }): { routes: ListenerRoutes } {
  const members = new MemberService({ ...deps, store: new MemberStore() });
  return { routes: { control: memberRoutes({ members }) } };
}
