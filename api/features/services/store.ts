import { isUniqueViolation } from '../../http/errors';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { ServicePatch, ServiceRecord } from './types';

export class ServiceSlugTakenError extends Error {
  constructor(readonly slug: string) {
    super(`slug ${slug} taken`);
  }
}

interface ServiceRow {
  id: string;
  project_id: string;
  name: string;
  slug: string;
  description: string;
  tags: string[];
  created_at: Date;
  updated_at: Date;
}

const toService = (r: ServiceRow): ServiceRecord => ({
  id: r.id,
  projectId: r.project_id,
  name: r.name,
  slug: r.slug,
  description: r.description,
  tags: r.tags,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/** `%` and `_` in a search term match themselves. */
export const likePattern = (term: string) => `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export class ServiceStore {
  async insert(db: Queryable, s: { id: string; projectId: string; name: string; slug: string; description: string; tags: string[] }): Promise<ServiceRecord> {
    try {
      const [row] = await db<ServiceRow[]>`
        INSERT INTO services (id, project_id, name, slug, description, tags)
        VALUES (${s.id}, ${s.projectId}, ${s.name}, ${s.slug}, ${s.description}, ${db.json(s.tags)})
        RETURNING *`;
      return toService(row);
    } catch (error) {
      if (isUniqueViolation(error)) throw new ServiceSlugTakenError(s.slug);
      throw error;
    }
  }

  /** With forUpdate, the row stays locked until the transaction ends. */
  findById(tx: TransactionSql, id: string, opts: { forUpdate: true }): Promise<ServiceRecord | null>;
  findById(db: Queryable, id: string): Promise<ServiceRecord | null>;
  async findById(db: Queryable, id: string, opts: { forUpdate?: boolean } = {}): Promise<ServiceRecord | null> {
    const [row] = opts.forUpdate
      ? await db<ServiceRow[]>`SELECT * FROM services WHERE id = ${id} FOR UPDATE`
      : await db<ServiceRow[]>`SELECT * FROM services WHERE id = ${id}`;
    return row ? toService(row) : null;
  }

  async findBySlug(db: Queryable, projectIds: string[], slug: string): Promise<ServiceRecord[]> {
    if (!projectIds.length) return [];
    const rows = await db<ServiceRow[]>`SELECT * FROM services WHERE slug = ${slug} AND project_id IN ${db(projectIds)} ORDER BY created_at`;
    return rows.map(toService);
  }

  /** Name or slug contains `search` (case-insensitive); ordered by name. */
  async list(db: Queryable, q: { projectIds: string[]; search?: string; limit: number; offset: number }): Promise<{ services: ServiceRecord[]; total: number }> {
    if (!q.projectIds.length) return { services: [], total: 0 };
    const match = () => (q.search ? db`AND (name ILIKE ${likePattern(q.search)} OR slug ILIKE ${likePattern(q.search)})` : db``);
    const rows = await db<(ServiceRow & { total: number })[]>`
      SELECT *, count(*) OVER ()::int AS total FROM services
      WHERE project_id IN ${db(q.projectIds)} ${match()}
      ORDER BY lower(name), id LIMIT ${q.limit} OFFSET ${q.offset}`;
    let total = rows[0]?.total ?? 0;
    if (!rows.length && q.offset > 0) {
      const [count] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM services WHERE project_id IN ${db(q.projectIds)} ${match()}`;
      total = count.n;
    }
    return { services: rows.map(toService), total };
  }

  async update(db: Queryable, id: string, patch: ServicePatch): Promise<ServiceRecord> {
    try {
      const [row] = await db<ServiceRow[]>`
        UPDATE services SET
          name = COALESCE(${patch.name ?? null}, name),
          slug = COALESCE(${patch.slug ?? null}, slug),
          description = COALESCE(${patch.description ?? null}, description),
          tags = COALESCE(${patch.tags ? db.json(patch.tags) : null}::jsonb, tags),
          updated_at = now()
        WHERE id = ${id} RETURNING *`;
      return toService(row);
    } catch (error) {
      if (isUniqueViolation(error) && patch.slug) throw new ServiceSlugTakenError(patch.slug);
      throw error;
    }
  }

  /** Deletes the service; its flags and everything keyed on it cascade. */
  async delete(db: Queryable, id: string): Promise<void> {
    await db`DELETE FROM services WHERE id = ${id}`;
  }
}
