import type { OrgRole } from '../../auth/principal';
import { isUniqueViolation } from '../../http/errors';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { ProjectPatch, ProjectRecord } from './types';
import type { PrometheusGuard } from '../../domain/guards';

export class ProjectSlugTakenError extends Error {
  constructor(readonly slug: string) {
    super(`slug ${slug} taken`);
  }
}

interface ProjectRow {
  id: string;
  org_id: string;
  name: string;
  slug: string;
  description: string;
  tags: string[];
  require_write_token: boolean;
  guardrail_auto_rollback: boolean;
  guardrail_window_minutes: number;
  require_in_process_compatible: boolean;
  guardrail_guards: PrometheusGuard[];
  created_at: Date;
  updated_at: Date;
}

export function toProject(row: ProjectRow): ProjectRecord {
  return {
    id: row.id,
    orgId: row.org_id,
    name: row.name,
    slug: row.slug,
    description: row.description,
    tags: row.tags,
    requireWriteToken: row.require_write_token,
    guardrailAutoRollback: row.guardrail_auto_rollback,
    guardrailWindowMinutes: row.guardrail_window_minutes,
    requireInProcessCompatible: row.require_in_process_compatible,
    guardrailGuards: row.guardrail_guards,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** Projects and the organization facts project creation and deleted-project audit need. */
export class ProjectStore {
  async insert(
    db: Queryable,
    p: { id: string; orgId: string; name: string; slug: string; description: string; tags: string[]; createdBy: string },
  ): Promise<ProjectRecord> {
    try {
      const [row] = await db<ProjectRow[]>`
        INSERT INTO projects (id, org_id, name, slug, description, tags, created_by)
        VALUES (${p.id}, ${p.orgId}, ${p.name}, ${p.slug}, ${p.description}, ${db.json(p.tags)}, ${p.createdBy})
        RETURNING *`;
      return toProject(row);
    } catch (error) {
      if (isUniqueViolation(error)) throw new ProjectSlugTakenError(p.slug);
      throw error;
    }
  }

  /** With forUpdate, the row stays locked until the transaction ends. */
  findById(tx: TransactionSql, id: string, opts: { forUpdate: true }): Promise<ProjectRecord | null>;
  findById(db: Queryable, id: string): Promise<ProjectRecord | null>;
  async findById(db: Queryable, id: string, opts: { forUpdate?: boolean } = {}): Promise<ProjectRecord | null> {
    const [row] = opts.forUpdate
      ? await db<ProjectRow[]>`SELECT * FROM projects WHERE id = ${id} FOR UPDATE`
      : await db<ProjectRow[]>`SELECT * FROM projects WHERE id = ${id}`;
    return row ? toProject(row) : null;
  }

  async findByIds(db: Queryable, ids: string[]): Promise<ProjectRecord[]> {
    if (!ids.length) return [];
    const rows = await db<ProjectRow[]>`SELECT * FROM projects WHERE id IN ${db(ids)} ORDER BY lower(name), id`;
    return rows.map(toProject);
  }

  async update(db: Queryable, id: string, patch: ProjectPatch): Promise<ProjectRecord> {
    try {
      const [row] = await db<ProjectRow[]>`
        UPDATE projects SET
          name = COALESCE(${patch.name ?? null}, name),
          description = COALESCE(${patch.description ?? null}, description),
          slug = COALESCE(${patch.slug ?? null}, slug),
          tags = COALESCE(${patch.tags ? db.json(patch.tags) : null}::jsonb, tags),
          require_write_token = COALESCE(${patch.requireWriteToken ?? null}, require_write_token),
          guardrail_auto_rollback = COALESCE(${patch.guardrailAutoRollback ?? null}, guardrail_auto_rollback),
          guardrail_window_minutes = COALESCE(${patch.guardrailWindowMinutes ?? null}, guardrail_window_minutes),
          require_in_process_compatible = COALESCE(${patch.requireInProcessCompatible ?? null}, require_in_process_compatible),
          guardrail_guards = COALESCE(${patch.guardrailGuards ? db.json(patch.guardrailGuards as never) : null}::jsonb, guardrail_guards),
          updated_at = now()
        WHERE id = ${id} RETURNING *`;
      return toProject(row);
    } catch (error) {
      if (isUniqueViolation(error) && patch.slug) throw new ProjectSlugTakenError(patch.slug);
      throw error;
    }
  }

  /** Deletes the project; every table referencing projects(id) cascades. */
  async delete(db: Queryable, id: string): Promise<void> {
    await db`DELETE FROM projects WHERE id = ${id}`;
  }

  async addOwner(db: Queryable, projectId: string, userId: string): Promise<void> {
    await db`INSERT INTO project_members (project_id, user_id, role) VALUES (${projectId}, ${userId}, 'owner')`;
  }

  async personalOrgOf(db: Queryable, userId: string): Promise<string | null> {
    const [row] = await db<{ id: string }[]>`
      SELECT o.id FROM orgs o JOIN org_members m ON m.org_id = o.id
      WHERE m.user_id = ${userId} AND m.role = 'owner' AND o.personal AND o.created_by = ${userId}
      ORDER BY o.created_at LIMIT 1`;
    return row?.id ?? null;
  }

  async orgRoleOf(db: Queryable, userId: string, orgId: string): Promise<OrgRole | null> {
    const [row] = await db<{ role: OrgRole }[]>`SELECT role FROM org_members WHERE org_id = ${orgId} AND user_id = ${userId}`;
    return row?.role ?? null;
  }

  async recordDeletion(db: Queryable, project: ProjectRecord, deletedBy: string | null): Promise<void> {
    await db`
      INSERT INTO deleted_projects (id, org_id, name, slug, deleted_by)
      VALUES (${project.id}, ${project.orgId}, ${project.name}, ${project.slug}, ${deletedBy})
      ON CONFLICT (id) DO NOTHING`;
  }

  async findDeleted(db: Queryable, id: string): Promise<{ id: string; orgId: string } | null> {
    const [row] = await db<{ id: string; org_id: string }[]>`SELECT id, org_id FROM deleted_projects WHERE id = ${id}`;
    return row ? { id: row.id, orgId: row.org_id } : null;
  }
}
