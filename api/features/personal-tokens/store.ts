import type { UserRecord } from '../../auth/principal';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import { toUser } from '../accounts/store';
import type { PersonalTokenRow } from './types';

export interface NewPersonalToken {
  id: string;
  userId: string;
  name: string;
  tier: PersonalTokenRow['tier'];
  allowOwnerActions: boolean;
  secretHash: string;
  lastFour: string;
  expiresInDays: number;
  expiresAt: Date;
  rotatedFrom: string | null;
}

/** Personal access tokens in Postgres. */
export class PersonalTokenStore {
  /** Serialises token creation per user, so the 20-token limit holds under concurrency. */
  async lockUser(tx: TransactionSql, userId: string): Promise<void> {
    await tx`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`;
  }

  async countActive(tx: TransactionSql, userId: string): Promise<number> {
    const [row] = await tx<{ n: number }[]>`
      SELECT count(*)::int AS n FROM personal_tokens WHERE user_id = ${userId} AND revoked_at IS NULL AND expires_at > now()`;
    return row.n;
  }

  async insert(tx: TransactionSql, t: NewPersonalToken): Promise<PersonalTokenRow> {
    const [row] = await tx<PersonalTokenRow[]>`
      INSERT INTO personal_tokens (id, user_id, name, tier, allow_owner_actions, secret_hash, last_four, expires_in_days, expires_at, rotated_from)
      VALUES (${t.id}, ${t.userId}, ${t.name}, ${t.tier}, ${t.allowOwnerActions}, ${t.secretHash}, ${t.lastFour}, ${t.expiresInDays}, ${t.expiresAt}, ${t.rotatedFrom})
      RETURNING *`;
    return row;
  }

  /** The user's tokens that are not revoked (expired ones included, marked as such). */
  async listForUser(db: Queryable, userId: string): Promise<PersonalTokenRow[]> {
    return db<PersonalTokenRow[]>`
      SELECT * FROM personal_tokens WHERE user_id = ${userId} AND revoked_at IS NULL ORDER BY created_at DESC, id DESC`;
  }

  async lockLive(tx: TransactionSql, userId: string, id: string): Promise<PersonalTokenRow | null> {
    const [row] = await tx<PersonalTokenRow[]>`
      SELECT * FROM personal_tokens WHERE id = ${id} AND user_id = ${userId} AND revoked_at IS NULL FOR UPDATE`;
    return row ?? null;
  }

  async revoke(db: Queryable, userId: string, id: string): Promise<PersonalTokenRow | null> {
    const [row] = await db<PersonalTokenRow[]>`
      UPDATE personal_tokens SET revoked_at = now() WHERE id = ${id} AND user_id = ${userId} AND revoked_at IS NULL RETURNING *`;
    return row ?? null;
  }

  async findLiveBySecretHash(db: Queryable, secretHash: string): Promise<{ token: PersonalTokenRow; user: UserRecord } | null> {
    const [row] = await db<(PersonalTokenRow & { u_email: string; u_name: string; u_email_verified: boolean; u_created_at: Date })[]>`
      SELECT t.*, u.email AS u_email, u.name AS u_name, u.email_verified AS u_email_verified, u.created_at AS u_created_at
      FROM personal_tokens t JOIN users u ON u.id = t.user_id
      WHERE t.secret_hash = ${secretHash} AND t.revoked_at IS NULL`;
    if (!row) return null;
    const user = toUser({ id: row.user_id, email: row.u_email, name: row.u_name, email_verified: row.u_email_verified, created_at: row.u_created_at });
    return { token: row, user };
  }

  /** Records use at most once a minute per token. */
  async touch(db: Queryable, id: string): Promise<void> {
    await db`
      UPDATE personal_tokens SET last_used_at = now()
      WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`;
  }
}
