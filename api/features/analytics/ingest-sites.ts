import type { Sql } from '../../infra/postgres';

/** What browser ingestion needs of a site (a service, docs/api-reference.md#browser-analytics). */
export interface IngestSite {
  projectId: string;
  orgId: string;
  /** The project's requireWriteToken setting. */
  requireWriteToken: boolean;
}

const TTL_MS = 10_000;
const MAX_CACHED = 20_000;

/**
 * Service id -> its project and write-token setting, one query for a request's distinct site ids.
 * Answers (unknown ones too) are kept 10 s: pages post on every view and SDKs flush every few
 * seconds from every instance, and such bursts must not become bursts of Postgres queries. A
 * changed setting, a new or a deleted service takes effect within that time.
 */
export class IngestSites {
  private readonly cached = new Map<string, { site: IngestSite | null; until: number }>();

  constructor(private readonly sql: Sql) {}

  async resolve(siteIds: Iterable<string>): Promise<Map<string, IngestSite | null>> {
    const now = Date.now();
    const found = new Map<string, IngestSite | null>();
    const missing: string[] = [];
    for (const id of new Set(siteIds)) {
      const hit = this.cached.get(id);
      if (hit !== undefined && hit.until > now) found.set(id, hit.site);
      else missing.push(id);
    }
    if (missing.length === 0) return found;
    const rows = await this.sql<{ id: string; project_id: string; org_id: string; require_write_token: boolean }[]>`
      SELECT s.id, s.project_id, p.org_id, p.require_write_token FROM services s JOIN projects p ON p.id = s.project_id
      WHERE s.id IN ${this.sql(missing)}`;
    const byId = new Map(rows.map((r) => [r.id, { projectId: r.project_id, orgId: r.org_id, requireWriteToken: r.require_write_token }]));
    if (this.cached.size + missing.length > MAX_CACHED) this.cached.clear();
    for (const id of missing) {
      const site = byId.get(id) ?? null;
      found.set(id, site);
      this.cached.set(id, { site, until: now + TTL_MS });
    }
    return found;
  }
}
