import type { Sql } from '../api/infra/postgres';
import { writeAudit } from '../api/features/audit/writer';
import type { InvitationActivities } from '../workflows/messages';

export interface InvitationDeps {
  sql: Sql;
}

/** The audit actor of expiries: nobody did it, the clock did. */
const EXPIRY_ACTOR = { name: 'system:invitation-expiry', userId: null };

export function createInvitationActivities(deps: InvitationDeps): InvitationActivities {
  return {
    /**
     * Marks a still-pending invitation expired and records it in the project's audit trail.
     * Idempotent: a retry, or an invitation accepted, cancelled or deleted meanwhile, changes
     * nothing. Returns whether this call expired it.
     */
    async expireInvitation(invitationId: string): Promise<boolean> {
      return deps.sql.begin(async (tx) => {
        const [row] = await tx<{ project_id: string; email: string; role: string }[]>`
          UPDATE invitations SET status = 'expired', settled_at = now()
          WHERE id = ${invitationId} AND status = 'pending'
          RETURNING project_id, email, role`;
        if (!row) return false;
        await writeAudit(tx, EXPIRY_ACTOR, {
          projectId: row.project_id,
          action: 'invitation.expire',
          resourceType: 'invitation',
          resourceId: invitationId,
          resourceName: row.email,
          before: { status: 'pending' },
          after: { status: 'expired' },
          metadata: { email: row.email, role: row.role },
        });
        return true;
      });
    },
  };
}
