import { requireGrantable } from '../../auth/access';
import type { UserRecord } from '../../auth/principal';
import { conflict, forbidden, HttpError, notFound, serviceUnavailable } from '../../http/errors';
import { newId, randomSecret, sha256Hex } from '../../infra/ids';
import type { Logger } from '../../infra/logger';
import type { Sql, TransactionSql } from '../../infra/postgres';
import { requireVerifiedEmail } from '../accounts/verified';
import { actorFromPrincipal, writeAudit, type AuditActor } from '../audit/writer';
import type { MailQueue } from '../../lib/mail/mail-queue';
import type { MemberStore } from '../members/store';
import type { MemberRecord } from '../members/types';
import type { Caller } from '../projects/common';
import type { ProjectStore } from '../projects/store';
import type { ProjectRecord } from '../projects/types';
import type { InvitationExpiryTimers } from './expiry';
import { PendingInvitationExistsError, type InvitationStore } from './store';
import { INVITATION_LIFETIME_MS, type InvitableRole, type InvitationRecord, type InvitationStatus } from './types';

export interface InvitationServiceDeps {
  sql: Sql;
  store: InvitationStore;
  members: MemberStore;
  projects: ProjectStore;
  timers: InvitationExpiryTimers;
  mail: MailQueue;
  publicBaseUrl: string;
  logger: Logger;
}

export interface AcceptedInvitation {
  membership: MemberRecord;
  project: Pick<ProjectRecord, 'id' | 'orgId' | 'name' | 'slug'>;
}

const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
const gone = (status: InvitationStatus) =>
  new HttpError(410, status === 'accepted' ? 'This invitation has already been accepted' : `This invitation has ${status === 'expired' ? 'expired' : 'been cancelled'}`);

/**
 * Invitations by e-mail (docs/api-reference.md#members-and-invitations): a random single-use token
 * is mailed, only its SHA-256 is stored, and a Temporal timer expires the invitation after 7 days
 * unless it is accepted or cancelled first. Accepting needs a dashboard session whose e-mail
 * matches the invitation (compared case-insensitively, like sign-in) and is verified.
 */
export class InvitationService {
  constructor(private readonly deps: InvitationServiceDeps) {}

  async list(projectId: string, status?: InvitationStatus): Promise<InvitationRecord[]> {
    return this.deps.store.list(this.deps.sql, projectId, status);
  }

  async create(caller: Caller, projectId: string, input: { email: string; role: InvitableRole }): Promise<InvitationRecord> {
    const { store, members, projects, sql } = this.deps;
    requireGrantable(caller.principal, input.role);
    const project = await projects.findById(sql, projectId);
    if (!project) throw notFound('Project');
    if (await members.findByEmail(sql, projectId, input.email)) throw conflict('A user with this e-mail is already a member of the project');
    const token = randomSecret(32);
    const actor = actorFromPrincipal(caller.principal, caller);
    let invitation: InvitationRecord;
    try {
      invitation = await sql.begin(async (tx) => {
        await store.expireLapsed(tx, projectId, input.email);
        const created = await store.insert(tx, {
          id: newId('inv'),
          projectId,
          email: input.email,
          role: input.role,
          tokenHash: sha256Hex(token),
          invitedBy: actor.userId,
          expiresAt: new Date(Date.now() + INVITATION_LIFETIME_MS),
        });
        await this.audit(tx, actor, 'invitation.create', created, null, created);
        return created;
      });
    } catch (error) {
      if (error instanceof PendingInvitationExistsError) {
        throw conflict('A pending invitation for this e-mail already exists; cancel it to invite again');
      }
      throw error;
    }

    try {
      await this.deps.timers.start(invitation.id);
      await this.deps.mail.send(
        {
          to: invitation.email,
          subject: `You are invited to the project ${project.name}`,
          text:
            `${actor.name} invited you to join the project "${project.name}" as ${invitation.role}.\n\n` +
            `Accept by opening ${this.deps.publicBaseUrl}/invitations/accept?token=${token}\n` +
            `(or POST /api/invitations/${token}/accept while signed in as ${invitation.email}).\n` +
            `The invitation expires on ${invitation.expiresAt}.`,
          token,
        },
        `invitation-${invitation.id}`,
      );
    } catch (error) {
      // Nobody can use an invitation that was never mailed: withdraw it so the address can be invited again.
      this.deps.logger.error({ err: error, invitationId: invitation.id }, 'invitation could not be scheduled or mailed');
      await sql.begin(async (tx) => {
        const withdrawn = await store.settle(tx, invitation.id, 'cancelled');
        if (withdrawn) await this.audit(tx, actor, 'invitation.cancel', withdrawn, invitation, withdrawn, { reason: 'delivery_failed' });
      });
      await this.deps.timers.settle([invitation.id]);
      throw serviceUnavailable('The invitation could not be sent; try again');
    }
    return invitation;
  }

  async cancel(caller: Caller, projectId: string, invitationId: string): Promise<void> {
    const { store, sql } = this.deps;
    const invitation = await store.get(sql, projectId, invitationId);
    if (!invitation) throw notFound('Invitation');
    await sql.begin(async (tx) => {
      const cancelled = await store.settle(tx, invitationId, 'cancelled');
      if (!cancelled) throw conflict(`The invitation is already ${invitation.status === 'pending' ? 'settled' : invitation.status}`);
      await this.audit(tx, actorFromPrincipal(caller.principal, caller), 'invitation.cancel', cancelled, invitation, cancelled);
    });
    await this.deps.timers.settle([invitationId]);
  }

  /**
   * Single use: accepted, cancelled or expired invitations answer 410 Gone. A user who is
   * already a member keeps their current role.
   */
  async accept(caller: Caller, user: UserRecord, token: string): Promise<AcceptedInvitation> {
    const { store, members, projects, sql } = this.deps;
    const tokenHash = sha256Hex(token);
    const found = await store.findByTokenHash(sql, tokenHash);
    if (!found) throw notFound('Invitation');
    if (!sameAddress(found.email, user.email)) {
      throw forbidden('this invitation was sent to a different e-mail address; sign in with the invited address');
    }
    // The matching address must be proven to be theirs, not just typed in at signup.
    requireVerifiedEmail(user, 'accepting invitations');
    const actor = actorFromPrincipal(caller.principal, caller);
    const result = await sql.begin(async (tx) => {
      const invitation = await store.findByTokenHash(tx, tokenHash, { forUpdate: true });
      if (!invitation) throw notFound('Invitation');
      if (invitation.status !== 'pending') throw gone(invitation.status);
      const project = await projects.findById(tx, invitation.projectId);
      if (!project) throw notFound('Invitation');
      const existing = await members.get(tx, invitation.projectId, user.id);
      const membership = existing ?? (await members.insert(tx, invitation.projectId, user.id, invitation.role));
      const accepted = await store.settle(tx, invitation.id, 'accepted', user.id);
      if (!accepted) throw gone('expired');
      await this.audit(tx, actor, 'invitation.accept', accepted, invitation, accepted, existing ? { alreadyMember: true, keptRole: existing.role } : undefined);
      if (!existing) {
        await writeAudit(tx, actor, {
          projectId: project.id,
          action: 'member.add',
          resourceType: 'member',
          resourceId: user.id,
          resourceName: user.email,
          after: { userId: user.id, email: user.email, role: membership.role },
          metadata: { invitationId: invitation.id },
        });
      }
      return { membership, project: { id: project.id, orgId: project.orgId, name: project.name, slug: project.slug } };
    });
    await this.deps.timers.settle([found.id]);
    return result;
  }

  private audit(
    tx: TransactionSql,
    actor: AuditActor,
    action: 'invitation.create' | 'invitation.accept' | 'invitation.cancel',
    invitation: InvitationRecord,
    before: InvitationRecord | null,
    after: InvitationRecord | null,
    metadata?: Record<string, unknown>,
  ) {
    return writeAudit(tx, actor, {
      projectId: invitation.projectId,
      action,
      resourceType: 'invitation',
      resourceId: invitation.id,
      resourceName: invitation.email,
      before,
      after,
      metadata,
    });
  }
}
