import { isUniqueViolation } from '../../http/errors';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { InvitableRole, InvitationRecord, InvitationStatus } from './types';

export class PendingInvitationExistsError extends Error {}

interface InvitationRow {
  id: string;
  project_id: string;
  email: string;
  role: InvitableRole;
  status: InvitationStatus;
  invited_by: string | null;
  accepted_by: string | null;
  created_at: Date;
  expires_at: Date;
  settled_at: Date | null;
  /** A pending row past its expiry reads as expired even before the timer marks it. */
  lapsed: boolean;
}

const toInvitation = (r: InvitationRow): InvitationRecord => ({
  id: r.id,
  projectId: r.project_id,
  email: r.email,
  role: r.role,
  status: r.status === 'pending' && r.lapsed ? 'expired' : r.status,
  invitedBy: r.invited_by,
  acceptedBy: r.accepted_by,
  createdAt: r.created_at.toISOString(),
  expiresAt: r.expires_at.toISOString(),
  settledAt: r.settled_at?.toISOString() ?? null,
});

export class InvitationStore {
  async insert(
    db: Queryable,
    i: { id: string; projectId: string; email: string; role: InvitableRole; tokenHash: string; invitedBy: string | null; expiresAt: Date },
  ): Promise<InvitationRecord> {
    try {
      const [row] = await db<InvitationRow[]>`
        INSERT INTO invitations (id, project_id, email, role, token_hash, invited_by, expires_at)
        VALUES (${i.id}, ${i.projectId}, ${i.email}, ${i.role}, ${i.tokenHash}, ${i.invitedBy}, ${i.expiresAt})
        RETURNING *, expires_at <= now() AS lapsed`;
      return toInvitation(row);
    } catch (error) {
      if (isUniqueViolation(error)) throw new PendingInvitationExistsError();
      throw error;
    }
  }

  async list(db: Queryable, projectId: string, status?: InvitationStatus): Promise<InvitationRecord[]> {
    const rows = await db<InvitationRow[]>`
      SELECT *, expires_at <= now() AS lapsed FROM invitations WHERE project_id = ${projectId} ORDER BY created_at DESC, id DESC`;
    const all = rows.map(toInvitation);
    return status ? all.filter((i) => i.status === status) : all;
  }

  async get(db: Queryable, projectId: string, id: string): Promise<InvitationRecord | null> {
    const [row] = await db<InvitationRow[]>`
      SELECT *, expires_at <= now() AS lapsed FROM invitations WHERE project_id = ${projectId} AND id = ${id}`;
    return row ? toInvitation(row) : null;
  }

  /** With forUpdate, the row stays locked until the transaction ends. */
  findByTokenHash(tx: TransactionSql, tokenHash: string, opts: { forUpdate: true }): Promise<InvitationRecord | null>;
  findByTokenHash(db: Queryable, tokenHash: string): Promise<InvitationRecord | null>;
  async findByTokenHash(db: Queryable, tokenHash: string, opts: { forUpdate?: boolean } = {}): Promise<InvitationRecord | null> {
    const [row] = opts.forUpdate
      ? await db<InvitationRow[]>`SELECT *, expires_at <= now() AS lapsed FROM invitations WHERE token_hash = ${tokenHash} FOR UPDATE`
      : await db<InvitationRow[]>`SELECT *, expires_at <= now() AS lapsed FROM invitations WHERE token_hash = ${tokenHash}`;
    return row ? toInvitation(row) : null;
  }

  /** Moves a pending, unexpired invitation to a final state; null when it was not pending. */
  async settle(db: Queryable, id: string, status: 'accepted' | 'cancelled', acceptedBy: string | null = null): Promise<InvitationRecord | null> {
    const [row] = await db<InvitationRow[]>`
      UPDATE invitations SET status = ${status}, accepted_by = ${acceptedBy}, settled_at = now()
      WHERE id = ${id} AND status = 'pending' AND expires_at > now()
      RETURNING *, false AS lapsed`;
    return row ? toInvitation(row) : null;
  }

  /** A lapsed invitation the timer has not marked yet must not block a new one for the address. */
  async expireLapsed(db: Queryable, projectId: string, email: string): Promise<void> {
    await db`
      UPDATE invitations SET status = 'expired', settled_at = now()
      WHERE project_id = ${projectId} AND lower(email) = lower(${email}) AND status = 'pending' AND expires_at <= now()`;
  }

  async pendingIds(db: Queryable, projectId: string): Promise<string[]> {
    const rows = await db<{ id: string }[]>`SELECT id FROM invitations WHERE project_id = ${projectId} AND status = 'pending'`;
    return rows.map((r) => r.id);
  }
}
