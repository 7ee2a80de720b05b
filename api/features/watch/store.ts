import type { Environment } from '../../domain/environments';
import type { FieldChange } from '../audit/writer';
import type { Queryable } from '../../infra/postgres';
import type { NotificationRecord, WatchTarget } from './types';

interface NotificationRow {
  id: string;
  project_id: string;
  service_id: string;
  environment: Environment;
  flag_key: string;
  user_id: string | null;
  actor: string;
  action: string;
  resource_type: string;
  resource_id: string;
  resource_name: string | null;
  changes: FieldChange[];
  metadata: Record<string, unknown>;
  timestamp: Date;
  read: boolean;
  unread_count: number;
}

/** flag_watches and notification_reads; notifications are read straight from audit_logs. */
export class WatchStore {
  async flagId(db: Queryable, t: WatchTarget): Promise<string | null> {
    const [row] = await db<{ id: string }[]>`
      SELECT id FROM flags WHERE service_id = ${t.serviceId} AND environment = ${t.environment} AND key = ${t.flagKey}`;
    return row?.id ?? null;
  }

  /** Idempotent; re-watching a re-created flag follows the new flag row. */
  async watch(db: Queryable, userId: string, projectId: string, t: WatchTarget, flagId: string): Promise<Date> {
    const [row] = await db<{ created_at: Date }[]>`
      INSERT INTO flag_watches (user_id, project_id, service_id, environment, flag_key, flag_id)
      VALUES (${userId}, ${projectId}, ${t.serviceId}, ${t.environment}, ${t.flagKey}, ${flagId})
      ON CONFLICT (user_id, service_id, environment, flag_key) DO UPDATE SET flag_id = EXCLUDED.flag_id
      RETURNING created_at`;
    return row.created_at;
  }

  async unwatch(db: Queryable, userId: string, t: WatchTarget): Promise<void> {
    await db`
      DELETE FROM flag_watches
      WHERE user_id = ${userId} AND service_id = ${t.serviceId} AND environment = ${t.environment} AND flag_key = ${t.flagKey}`;
  }

  async isWatching(db: Queryable, userId: string, t: WatchTarget): Promise<boolean> {
    const rows = await db`
      SELECT 1 FROM flag_watches
      WHERE user_id = ${userId} AND service_id = ${t.serviceId} AND environment = ${t.environment} AND flag_key = ${t.flagKey}`;
    return rows.length > 0;
  }

  /**
   * Audit entries on the user's watched flags since each watch began, by anyone but the user,
   * in projects the user still belongs to. A watch matches the flag row it was made on (so the
   * flag.delete entry arrives) and the row now holding its key (a re-created flag).
   */
  async notifications(db: Queryable, userId: string, limit: number): Promise<{ notifications: NotificationRecord[]; unreadCount: number }> {
    const rows = await db<NotificationRow[]>`
      WITH watched AS (
        SELECT w.project_id, w.service_id, w.environment, w.flag_key, w.flag_id, w.created_at,
               (SELECT f.id FROM flags f WHERE f.service_id = w.service_id AND f.environment = w.environment AND f.key = w.flag_key) AS current_flag_id
        FROM flag_watches w
        JOIN project_members m ON m.project_id = w.project_id AND m.user_id = w.user_id
        WHERE w.user_id = ${userId}
      ),
      matched AS (
        SELECT a.*, w.service_id, w.environment, w.flag_key,
               COALESCE(a.timestamp <= (SELECT read_at FROM notification_reads WHERE user_id = ${userId}), false) AS read
        FROM watched w
        JOIN audit_logs a ON a.project_id = w.project_id AND a.resource_type = 'flag'
                         AND a.resource_id IN (w.flag_id, w.current_flag_id)
        WHERE a.timestamp >= w.created_at AND a.user_id IS DISTINCT FROM ${userId}
      )
      SELECT *, (count(*) FILTER (WHERE NOT read) OVER ())::int AS unread_count
      FROM matched ORDER BY timestamp DESC, id DESC LIMIT ${limit}`;
    return {
      unreadCount: rows[0]?.unread_count ?? 0,
      notifications: rows.map((r) => ({
        id: r.id,
        projectId: r.project_id,
        serviceId: r.service_id,
        environment: r.environment,
        flagKey: r.flag_key,
        userId: r.user_id,
        actor: r.actor,
        action: r.action,
        resourceType: r.resource_type,
        resourceId: r.resource_id,
        resourceName: r.resource_name,
        changes: r.changes,
        metadata: r.metadata,
        timestamp: r.timestamp.toISOString(),
        read: r.read,
      })),
    };
  }

  /** Everything up to now counts as read. */
  async markAllRead(db: Queryable, userId: string): Promise<Date> {
    const [row] = await db<{ read_at: Date }[]>`
      INSERT INTO notification_reads (user_id, read_at) VALUES (${userId}, clock_timestamp())
      ON CONFLICT (user_id) DO UPDATE SET read_at = GREATEST(notification_reads.read_at, EXCLUDED.read_at)
      RETURNING read_at`;
    return row.read_at;
  }
}
