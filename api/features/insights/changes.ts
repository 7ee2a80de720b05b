import type { Queryable } from '../../infra/postgres';

/**
 * A flag's changes as the insights read them, from its version snapshots (flag_versions, written
 * by the one flag write path in the same transaction as the audit entry). A toggle is any
 * version whose `enabled` differs from the version before it: a toggle, an update or a rollback
 * that switched the flag on or off.
 */

export interface ToggleEntry {
  /** The id of the version snapshot that switched the flag. */
  id: string;
  timestamp: string;
  timestampMs: number;
  actor: string;
  transition: { from: 'enabled' | 'disabled'; to: 'enabled' | 'disabled' };
  environment: string;
  /** How long the flag stayed in the new state: until the next toggle, or until now for the latest. */
  durationMs: number;
}

export interface LatestChange {
  version: number;
  changeType: string;
  atMs: number;
  actor: string;
}

const state = (enabled: boolean) => (enabled ? 'enabled' : 'disabled');

export class FlagChangeHistory {
  /** Toggles of one flag since `sinceMs`, newest first, at most `limit`. */
  async toggles(db: Queryable, flagId: string, environment: string, sinceMs: number, nowMs: number, limit: number): Promise<ToggleEntry[]> {
    const rows = await db<{ id: string; created_at: Date; actor: string; enabled: boolean }[]>`
      SELECT id, created_at, actor, enabled FROM (
        SELECT id, version, created_at, actor, (snapshot->>'enabled')::boolean AS enabled,
               lag((snapshot->>'enabled')::boolean) OVER (ORDER BY version) AS was
        FROM flag_versions WHERE flag_id = ${flagId}
      ) v
      WHERE was IS NOT NULL AND was <> enabled AND created_at >= ${new Date(sinceMs)}
      ORDER BY version DESC LIMIT ${limit}`;
    return rows.map((row, i) => {
      const atMs = row.created_at.getTime();
      const untilMs = i === 0 ? nowMs : rows[i - 1].created_at.getTime();
      return {
        id: row.id,
        timestamp: row.created_at.toISOString(),
        timestampMs: atMs,
        actor: row.actor,
        transition: { from: state(!row.enabled), to: state(row.enabled) },
        environment,
        durationMs: Math.max(0, untilMs - atMs),
      };
    });
  }

  /** The flag's newest version: the change auto-rollback judges. */
  async latestChange(db: Queryable, flagId: string): Promise<LatestChange | null> {
    const [row] = await db<{ version: number; change_type: string; created_at: Date; actor: string }[]>`
      SELECT version, change_type, created_at, actor FROM flag_versions WHERE flag_id = ${flagId} ORDER BY version DESC LIMIT 1`;
    return row ? { version: row.version, changeType: row.change_type, atMs: row.created_at.getTime(), actor: row.actor } : null;
  }
}
