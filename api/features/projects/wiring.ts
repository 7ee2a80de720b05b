import type { ProjectAccess } from '../../auth/access';
import type { AnyRoute } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { Temporal } from '../../infra/temporal';
import { auditRoutes } from '../audit/routes';
import { AuditStore } from '../audit/store';
import { InvitationExpiryTimers } from '../invitations/expiry';
import { invitationRoutes } from '../invitations/routes';
import { InvitationService } from '../invitations/service';
import { InvitationStore } from '../invitations/store';
import type { MailQueue } from '../../lib/mail/mail-queue';
import { memberRoutes } from '../members/routes';
import { MemberService } from '../members/service';
import { MemberStore } from '../members/store';
import { serviceRoutes } from '../services/routes';
import { ServiceService } from '../services/service';
import { ServiceStore } from '../services/store';
import { watchRoutes } from '../watch/routes';
import { WatchService } from '../watch/service';
import { WatchStore } from '../watch/store';
import { projectRoutes } from './routes';
import { ProjectService } from './service';
import { ProjectStore } from './store';

export interface ProjectFeatureDeps {
  sql: Sql;
  access: ProjectAccess;
  temporal: Temporal;
  mail: MailQueue;
  publicBaseUrl: string;
  logger: Logger;
}

/**
 * Builds projects, services, members, invitations, audit queries and watching with their
 * dependencies, and returns their control-plane routes.
 */
export function projectFeatureRoutes(deps: ProjectFeatureDeps): AnyRoute[] {
  const { sql, access } = deps;
  const projectStore = new ProjectStore();
  const memberStore = new MemberStore();
  const invitationStore = new InvitationStore();
  const serviceStore = new ServiceStore();
  const invitationTimers = new InvitationExpiryTimers(deps.temporal, deps.logger);

  const projects = new ProjectService({ sql, access, store: projectStore, invitations: invitationStore, invitationTimers });
  const members = new MemberService({ sql, access, store: memberStore });
  const invitations = new InvitationService({
    sql,
    store: invitationStore,
    members: memberStore,
    projects: projectStore,
    timers: invitationTimers,
    mail: deps.mail,
    publicBaseUrl: deps.publicBaseUrl,
    logger: deps.logger,
  });
  const services = new ServiceService({ sql, store: serviceStore });
  const watch = new WatchService({ sql, store: new WatchStore() });

  return [
    ...projectRoutes({ projects }),
    ...memberRoutes({ members }),
    ...invitationRoutes({ invitations }),
    ...serviceRoutes({ services }),
    ...auditRoutes({ sql, access, audit: new AuditStore(), projects: projectStore }),
    ...watchRoutes({ watch }),
  ];
}
