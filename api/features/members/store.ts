import type { ProjectRole } from '../../auth/principal';
import { isUniqueViolation } from '../../http/errors';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { MemberRecord } from './types';

export class AlreadyMemberError extends Error {}

interface MemberRow {
  project_id: string;
  user_id: string;
  email: string;
  name: string;
  role: ProjectRole;
  created_at: Date;
  updated_at: Date;
}

const toMember = (r: MemberRow): MemberRecord => ({
  projectId: r.project_id,
  userId: r.user_id,
  email: r.email,
  name: r.name,
  role: r.role,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/** project_members joined with users. */
export class MemberStore {
  async list(db: Queryable, projectId: string): Promise<MemberRecord[]> {
    const rows = await db<MemberRow[]>`
      SELECT m.project_id, m.user_id, u.email, u.name, m.role, m.created_at, m.updated_at
      FROM project_members m JOIN users u ON u.id = m.user_id
      WHERE m.project_id = ${projectId}
      ORDER BY array_position(ARRAY['owner','admin','member','viewer'], m.role), lower(u.email)`;
    return rows.map(toMember);
  }

  /** With forUpdate, the row stays locked until the transaction ends. */
  get(tx: TransactionSql, projectId: string, userId: string, opts: { forUpdate: true }): Promise<MemberRecord | null>;
  get(db: Queryable, projectId: string, userId: string): Promise<MemberRecord | null>;
  async get(db: Queryable, projectId: string, userId: string, opts: { forUpdate?: boolean } = {}): Promise<MemberRecord | null> {
    const [row] = opts.forUpdate
      ? await db<MemberRow[]>`
          SELECT m.project_id, m.user_id, u.email, u.name, m.role, m.created_at, m.updated_at
          FROM project_members m JOIN users u ON u.id = m.user_id
          WHERE m.project_id = ${projectId} AND m.user_id = ${userId} FOR UPDATE OF m`
      : await db<MemberRow[]>`
          SELECT m.project_id, m.user_id, u.email, u.name, m.role, m.created_at, m.updated_at
          FROM project_members m JOIN users u ON u.id = m.user_id
          WHERE m.project_id = ${projectId} AND m.user_id = ${userId}`;
    return row ? toMember(row) : null;
  }

  async findByEmail(db: Queryable, projectId: string, email: string): Promise<MemberRecord | null> {
    const [row] = await db<MemberRow[]>`
      SELECT m.project_id, m.user_id, u.email, u.name, m.role, m.created_at, m.updated_at
      FROM project_members m JOIN users u ON u.id = m.user_id
      WHERE m.project_id = ${projectId} AND lower(u.email) = lower(${email})`;
    return row ? toMember(row) : null;
  }

  async insert(db: Queryable, projectId: string, userId: string, role: ProjectRole): Promise<MemberRecord> {
    try {
      await db`INSERT INTO project_members (project_id, user_id, role) VALUES (${projectId}, ${userId}, ${role})`;
    } catch (error) {
      if (isUniqueViolation(error)) throw new AlreadyMemberError();
      throw error;
    }
    return (await this.get(db, projectId, userId))!;
  }

  async updateRole(db: Queryable, projectId: string, userId: string, role: ProjectRole): Promise<MemberRecord> {
    await db`UPDATE project_members SET role = ${role}, updated_at = now() WHERE project_id = ${projectId} AND user_id = ${userId}`;
    return (await this.get(db, projectId, userId))!;
  }

  async delete(db: Queryable, projectId: string, userId: string): Promise<void> {
    await db`DELETE FROM project_members WHERE project_id = ${projectId} AND user_id = ${userId}`;
  }

  async countOwners(db: Queryable, projectId: string): Promise<number> {
    const [row] = await db<{ n: number }[]>`
      SELECT count(*)::int AS n FROM project_members WHERE project_id = ${projectId} AND role = 'owner'`;
    return row.n;
  }

  /** Serialises membership changes of one project, so two demotions cannot remove the last owner. */
  async lockProject(tx: TransactionSql, projectId: string): Promise<boolean> {
    const rows = await tx`SELECT 1 FROM projects WHERE id = ${projectId} FOR UPDATE`;
    return rows.length > 0;
  }

  async userExists(db: Queryable, userId: string): Promise<boolean> {
    const rows = await db`SELECT 1 FROM users WHERE id = ${userId}`;
    return rows.length > 0;
  }
}
