import type { ProjectAccess } from '../../auth/access';
import type { ListenerRoutes } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import type { InvitationExpiryTimers } from '../invitations/expiry';
import { InvitationStore } from '../invitations/store';
import { projectRoutes } from './routes';
import { ProjectService } from './service';
import { ProjectStore } from './store';
import type { PrometheusGuards } from '../../lib/release-safety/prometheus-guards';

/** Projects: create, rename, delete (a deletion cancels the project's pending invitations and their timers). */
export function createProjectFeature(deps: { sql: Sql; access: ProjectAccess; invitationTimers: InvitationExpiryTimers; guards: PrometheusGuards }): { routes: ListenerRoutes } {
  const projects = new ProjectService({ ...deps, store: new ProjectStore(), invitations: new InvitationStore() });
  return { routes: { control: projectRoutes({ projects }) } };
}
