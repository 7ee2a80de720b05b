import type { ListenerRoutes } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { Temporal } from '../../infra/temporal';
import type { MailQueue } from '../../lib/mail/mail-queue';
import { MemberStore } from '../members/store';
import { ProjectStore } from '../projects/store';
import { InvitationExpiryTimers } from './expiry';
import { invitationRoutes } from './routes';
import { InvitationService } from './service';
import { InvitationStore } from './store';

export interface InvitationFeature {
  routes: ListenerRoutes;
  /** The expiry timer per pending invitation: deleting a project cancels its invitations' timers. */
  timers: InvitationExpiryTimers;
}

/** Project invitations by e-mail, each expiring by a Temporal timer. */
export function createInvitationFeature(deps: { sql: Sql; temporal: Temporal; mail: MailQueue; publicBaseUrl: string; logger: Logger }): InvitationFeature {
  const timers = new InvitationExpiryTimers(deps.temporal, deps.logger);
  const invitations = new InvitationService({
    sql: deps.sql,
    store: new InvitationStore(),
    members: new MemberStore(),
    projects: new ProjectStore(),
    timers,
    mail: deps.mail,
    publicBaseUrl: deps.publicBaseUrl,
    logger: deps.logger,
  });
  return { routes: { control: invitationRoutes({ invitations }) }, timers };
}
