import type { Queryable } from '../../infra/postgres';
import type { FieldChange } from './writer';

/**
 * An audit entry as the API returns it (docs/api-reference.md#audit-log), plus `actor` (who, when
 * no user did it).
 */
export interface AuditLogRecord {
  id: string;
  projectId: string;
  userId: string | null;
  actor: string;
  action: string;
  resourceType: string;
  resourceId: string;
  resourceName: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  changes: FieldChange[];
  metadata: Record<string, unknown>;
  timestamp: string;
  ipAddress: string | null;
  userAgent: string | null;
}

export interface AuditQuery {
  projectId: string;
  action?: string;
  resourceType?: string;
  resourceId?: string;
  userId?: string;
  /** The recorded actor string (a token, trigger, canary...), as the facets list it. */
  actor?: string;
  startDate?: Date;
  /** Exclusive upper bound (a date-only endDate covers that whole day). */
  endBefore?: Date;
  limit: number;
  offset: number;
}

export interface AuditRow {
  id: string;
  project_id: string;
  user_id: string | null;
  actor: string;
  action: string;
  resource_type: string;
  resource_id: string;
  resource_name: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  changes: FieldChange[];
  metadata: Record<string, unknown>;
  ip_address: string | null;
  user_agent: string | null;
  timestamp: Date;
}

export const toAuditLog = (r: AuditRow): AuditLogRecord => ({
  id: r.id,
  projectId: r.project_id,
  userId: r.user_id,
  actor: r.actor,
  action: r.action,
  resourceType: r.resource_type,
  resourceId: r.resource_id,
  resourceName: r.resource_name,
  before: r.before,
  after: r.after,
  changes: r.changes,
  metadata: r.metadata,
  timestamp: r.timestamp.toISOString(),
  ipAddress: r.ip_address,
  userAgent: r.user_agent,
});

/** Reads of audit_logs; writes go through writer.ts inside each mutation's transaction. */
export class AuditStore {
  /** Newest first; `total` counts every entry matching the filters. */
  async query(db: Queryable, q: AuditQuery): Promise<{ logs: AuditLogRecord[]; total: number }> {
    const where = () => db`
      project_id = ${q.projectId}
      ${q.action ? db`AND action = ${q.action}` : db``}
      ${q.resourceType ? db`AND resource_type = ${q.resourceType}` : db``}
      ${q.resourceId ? db`AND resource_id = ${q.resourceId}` : db``}
      ${q.userId ? db`AND user_id = ${q.userId}` : db``}
      ${q.actor ? db`AND actor = ${q.actor}` : db``}
      ${q.startDate ? db`AND timestamp >= ${q.startDate}` : db``}
      ${q.endBefore ? db`AND timestamp < ${q.endBefore}` : db``}`;
    const [rows, [count]] = await Promise.all([
      db<AuditRow[]>`SELECT * FROM audit_logs WHERE ${where()} ORDER BY timestamp DESC, id DESC LIMIT ${q.limit} OFFSET ${q.offset}`,
      db<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_logs WHERE ${where()}`,
    ]);
    return { logs: rows.map(toAuditLog), total: count.n };
  }

  /** The distinct actions, resource types and actors in a project's audit trail, for its filters. */
  async facets(db: Queryable, projectId: string, actorLimit: number): Promise<AuditFacets> {
    const [actions, resourceTypes, actors] = await Promise.all([
      db<{ value: string }[]>`SELECT DISTINCT action AS value FROM audit_logs WHERE project_id = ${projectId} ORDER BY value`,
      db<{ value: string }[]>`SELECT DISTINCT resource_type AS value FROM audit_logs WHERE project_id = ${projectId} ORDER BY value`,
      db<{ actor: string; userId: string | null }[]>`
        SELECT actor, user_id AS "userId" FROM audit_logs WHERE project_id = ${projectId}
        GROUP BY actor, user_id ORDER BY max(timestamp) DESC LIMIT ${actorLimit}`,
    ]);
    return { actions: actions.map((r) => r.value), resourceTypes: resourceTypes.map((r) => r.value), actors };
  }
}

export interface AuditFacets {
  actions: string[];
  resourceTypes: string[];
  /** Most recent first. */
  actors: { actor: string; userId: string | null }[];
}
