import type { UserRecord } from '../../auth/principal';
import { isUniqueViolation } from '../../http/errors';
import type { Queryable, TransactionSql } from '../../infra/postgres';

export class DuplicateEmailError extends Error {}

interface UserRow {
  id: string;
  email: string;
  name: string;
  email_verified: boolean;
  created_at: Date;
  password_hash: string;
}

export function toUser(row: Pick<UserRow, 'id' | 'email' | 'name' | 'email_verified' | 'created_at'>): UserRecord {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    emailVerified: row.email_verified,
    createdAt: row.created_at.toISOString(),
  };
}

export interface SessionRow {
  user: UserRecord;
  csrfToken: string;
}

/** Users, sessions and e-mail verification tokens in Postgres. */
export class AccountStore {
  /** Creates the user and their personal organization together; DuplicateEmailError when the address is taken. */
  async createUser(tx: TransactionSql, u: { id: string; email: string; name: string; passwordHash: string; orgId: string }): Promise<UserRecord> {
    let row: UserRow;
    try {
      [row] = await tx<UserRow[]>`
        INSERT INTO users (id, email, name, password_hash)
        VALUES (${u.id}, ${u.email}, ${u.name}, ${u.passwordHash})
        RETURNING *`;
    } catch (error) {
      if (isUniqueViolation(error)) throw new DuplicateEmailError(u.email);
      throw error;
    }
    await tx`INSERT INTO orgs (id, name, personal, created_by) VALUES (${u.orgId}, ${`${u.name}'s organization`}, true, ${u.id})`;
    await tx`INSERT INTO org_members (org_id, user_id, role) VALUES (${u.orgId}, ${u.id}, 'owner')`;
    return toUser(row);
  }

  async findByEmail(db: Queryable, email: string): Promise<(UserRecord & { passwordHash: string }) | null> {
    const [row] = await db<UserRow[]>`SELECT * FROM users WHERE lower(email) = lower(${email})`;
    return row ? { ...toUser(row), passwordHash: row.password_hash } : null;
  }

  async findById(db: Queryable, id: string): Promise<UserRecord | null> {
    const [row] = await db<UserRow[]>`SELECT * FROM users WHERE id = ${id}`;
    return row ? toUser(row) : null;
  }

  async createSession(db: Queryable, s: { idHash: string; userId: string; csrfToken: string; ip: string; userAgent: string; expiresAt: Date }) {
    await db`
      INSERT INTO sessions (id_hash, user_id, csrf_token, ip, user_agent, expires_at)
      VALUES (${s.idHash}, ${s.userId}, ${s.csrfToken}, ${s.ip}, ${s.userAgent.slice(0, 512)}, ${s.expiresAt})`;
  }

  async findSession(db: Queryable, idHash: string): Promise<SessionRow | null> {
    const [row] = await db<(UserRow & { csrf_token: string })[]>`
      SELECT u.*, s.csrf_token FROM sessions s JOIN users u ON u.id = s.user_id
      WHERE s.id_hash = ${idHash} AND s.expires_at > now()`;
    return row ? { user: toUser(row), csrfToken: row.csrf_token } : null;
  }

  async deleteSession(db: Queryable, idHash: string) {
    await db`DELETE FROM sessions WHERE id_hash = ${idHash}`;
  }

  /** Expired rows are already refused on lookup; this only keeps the tables small. */
  async purgeExpired(db: Queryable): Promise<{ sessions: number; verifications: number }> {
    const sessions = await db`DELETE FROM sessions WHERE expires_at <= now() RETURNING 1`;
    const verifications = await db`DELETE FROM email_verifications WHERE expires_at <= now() - interval '1 day' RETURNING 1`;
    return { sessions: sessions.length, verifications: verifications.length };
  }

  async createVerification(db: Queryable, v: { tokenHash: string; userId: string; email: string; expiresAt: Date }) {
    await db`
      INSERT INTO email_verifications (token_hash, user_id, email, expires_at)
      VALUES (${v.tokenHash}, ${v.userId}, ${v.email}, ${v.expiresAt})`;
  }

  /** Marks the token used and the address verified in one step; null when unknown, used or expired. */
  async consumeVerification(tx: TransactionSql, tokenHash: string): Promise<UserRecord | null> {
    const [v] = await tx<{ user_id: string; email: string }[]>`
      UPDATE email_verifications SET used_at = now()
      WHERE token_hash = ${tokenHash} AND used_at IS NULL AND expires_at > now()
      RETURNING user_id, email`;
    if (!v) return null;
    const [row] = await tx<UserRow[]>`
      UPDATE users SET email_verified = true, updated_at = now()
      WHERE id = ${v.user_id} AND lower(email) = lower(${v.email})
      RETURNING *`;
    return row ? toUser(row) : null;
  }
}
