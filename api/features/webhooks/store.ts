import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { WebhookEvent, WebhookPatch, WebhookRecord, WebhookSigningTarget } from './types';

interface WebhookRow {
  id: string;
  project_id: string;
  url: string;
  secret: string;
  events: WebhookEvent[];
  active: boolean;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

const toWebhook = (r: WebhookRow): WebhookRecord => ({
  id: r.id,
  projectId: r.project_id,
  url: r.url,
  events: r.events,
  active: r.active,
  createdBy: r.created_by,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

export class WebhookStore {
  async insert(
    db: Queryable,
    w: { id: string; projectId: string; url: string; secret: string; events: WebhookEvent[]; active: boolean; createdBy: string | null },
  ): Promise<WebhookRecord> {
    const [row] = await db<WebhookRow[]>`
      INSERT INTO webhooks (id, project_id, url, secret, events, active, created_by)
      VALUES (${w.id}, ${w.projectId}, ${w.url}, ${w.secret}, ${db.json(w.events)}, ${w.active}, ${w.createdBy})
      RETURNING *`;
    return toWebhook(row);
  }

  /** With forUpdate, the row stays locked until the transaction ends. */
  findById(tx: TransactionSql, id: string, opts: { forUpdate: true }): Promise<WebhookRecord | null>;
  findById(db: Queryable, id: string): Promise<WebhookRecord | null>;
  async findById(db: Queryable, id: string, opts: { forUpdate?: boolean } = {}): Promise<WebhookRecord | null> {
    const [row] = opts.forUpdate
      ? await db<WebhookRow[]>`SELECT * FROM webhooks WHERE id = ${id} FOR UPDATE`
      : await db<WebhookRow[]>`SELECT * FROM webhooks WHERE id = ${id}`;
    return row ? toWebhook(row) : null;
  }

  async listByProject(db: Queryable, projectId: string): Promise<WebhookRecord[]> {
    const rows = await db<WebhookRow[]>`SELECT * FROM webhooks WHERE project_id = ${projectId} ORDER BY created_at, id`;
    return rows.map(toWebhook);
  }

  async update(db: Queryable, id: string, patch: WebhookPatch): Promise<WebhookRecord> {
    const [row] = await db<WebhookRow[]>`
      UPDATE webhooks SET
        url = COALESCE(${patch.url ?? null}, url),
        secret = COALESCE(${patch.secret ?? null}, secret),
        events = COALESCE(${patch.events ? db.json(patch.events) : null}::jsonb, events),
        active = COALESCE(${patch.active ?? null}::boolean, active),
        updated_at = now()
      WHERE id = ${id} RETURNING *`;
    return toWebhook(row);
  }

  async remove(db: Queryable, id: string): Promise<void> {
    await db`DELETE FROM webhooks WHERE id = ${id}`;
  }

  /** Active webhooks of the project subscribed to the event: the recipients of one flag change. */
  async subscribers(db: Queryable, projectId: string, event: WebhookEvent): Promise<WebhookRecord[]> {
    const rows = await db<WebhookRow[]>`
      SELECT * FROM webhooks
      WHERE project_id = ${projectId} AND active AND events ? ${event}
      ORDER BY created_at, id`;
    return rows.map(toWebhook);
  }

  async signingTarget(db: Queryable, id: string): Promise<WebhookSigningTarget | null> {
    const [row] = await db<Pick<WebhookRow, 'url' | 'secret' | 'active'>[]>`SELECT url, secret, active FROM webhooks WHERE id = ${id}`;
    return row ?? null;
  }
}
