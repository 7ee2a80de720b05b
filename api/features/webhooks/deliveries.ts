import pLimit from 'p-limit';
import { currentDeadline } from '../../infra/deadline';
import type { Queryable, Sql } from '../../infra/postgres';
import { signalWithStartWorkflow, type Temporal } from '../../infra/temporal';
import {
  DELIVERIES_QUEUED_ARGS,
  DELIVERY_LANE,
  deliveriesQueuedSignal,
  type AttemptOutcome,
  type AttemptResult,
  type DeliveryStatus,
  type QueuedDelivery,
} from '../../../workflows/messages';

/**
 * The outbound delivery log shared by webhooks and alert channels, and the queue that hands a
 * delivery to its Temporal workflow. A delivery's id is its workflow id, derived from the
 * target and the event, so enqueuing the same (target, event) twice never delivers twice.
 */

export interface DeliveryAttempt {
  attempt: number;
  outcome: AttemptOutcome;
  statusCode: number | null;
  error: string | null;
  durationMs: number | null;
  startedAt: string;
}

export interface DeliveryRecord {
  id: string;
  webhookId: string | null;
  alertChannelId: string | null;
  /** A delivery to an address given with its request (analytics export), signed with `signingSecret` when set. */
  targetUrl: string | null;
  signingSecret: string | null;
  event: string;
  eventId: string;
  flagKey: string | null;
  body: string;
  maxAttempts: number;
  status: DeliveryStatus;
  attemptCount: number;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
  completedAt: string | null;
}

export type DeliveryTarget =
  | { kind: 'webhook'; webhookId: string }
  | { kind: 'alert_channel'; channelId: string }
  /** One-off deliveries of a batch (an analytics export) to a URL its request gave. */
  | { kind: 'url'; batchId: string; url: string; secret: string | null };

export interface NewDelivery {
  target: DeliveryTarget;
  event: string;
  eventId: string;
  flagKey?: string | null;
  body: string;
  /** Attempts per delivery: 4 (docs/limits.md); a channel test send uses 1. */
  maxAttempts?: number;
}

interface DeliveryRow {
  id: string;
  webhook_id: string | null;
  alert_channel_id: string | null;
  target_url: string | null;
  signing_secret: string | null;
  event: string;
  event_id: string;
  flag_key: string | null;
  body: string;
  max_attempts: number;
  status: DeliveryStatus;
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  completed_at: Date | null;
}

interface AttemptRow {
  delivery_id: string;
  attempt: number;
  outcome: AttemptOutcome;
  status_code: number | null;
  error: string | null;
  duration_ms: number | null;
  started_at: Date;
}

const toDelivery = (r: DeliveryRow): DeliveryRecord => ({
  id: r.id,
  webhookId: r.webhook_id,
  alertChannelId: r.alert_channel_id,
  targetUrl: r.target_url,
  signingSecret: r.signing_secret,
  event: r.event,
  eventId: r.event_id,
  flagKey: r.flag_key,
  body: r.body,
  maxAttempts: r.max_attempts,
  status: r.status,
  attemptCount: r.attempt_count,
  lastStatusCode: r.last_status_code,
  lastError: r.last_error,
  createdAt: r.created_at.toISOString(),
  completedAt: r.completed_at?.toISOString() ?? null,
});

const toAttempt = (r: AttemptRow): DeliveryAttempt => ({
  attempt: r.attempt,
  outcome: r.outcome,
  statusCode: r.status_code,
  error: r.error,
  durationMs: r.duration_ms,
  startedAt: r.started_at.toISOString(),
});

/** Workflow ids (and delivery ids) are derived, never random: the derivation is the idempotency key. */
export function deliveryIdFor(target: DeliveryTarget, eventId: string): string {
  switch (target.kind) {
    case 'webhook':
      return `whd:${target.webhookId}:${eventId}`;
    case 'alert_channel':
      return `acd:${target.channelId}:${eventId}`;
    case 'url':
      return `urd:${target.batchId}:${eventId}`;
  }
}

export class DeliveryStore {
  /**
   * Inserts every delivery that does not exist yet, in one statement, and returns each one's
   * stored status: the new rows from the insert, the existing ones as they are (a re-dispatch).
   */
  async createMany(db: Queryable, items: { id: string; delivery: NewDelivery }[]): Promise<Pick<DeliveryRecord, 'id' | 'status' | 'maxAttempts'>[]> {
    if (!items.length) return [];
    const rows = items.map(({ id, delivery: d }) => ({
      id,
      webhook_id: d.target.kind === 'webhook' ? d.target.webhookId : null,
      alert_channel_id: d.target.kind === 'alert_channel' ? d.target.channelId : null,
      target_url: d.target.kind === 'url' ? d.target.url : null,
      signing_secret: d.target.kind === 'url' ? d.target.secret : null,
      event: d.event,
      event_id: d.eventId,
      flag_key: d.flagKey ?? null,
      body: d.body,
      max_attempts: d.maxAttempts ?? 4,
    }));
    // The outer SELECT sees the table as it was before the insert, so the two halves never overlap.
    const stored = await db<{ id: string; status: DeliveryStatus; max_attempts: number }[]>`
      WITH inserted AS (
        INSERT INTO outbound_deliveries ${db(rows)}
        ON CONFLICT (id) DO NOTHING
        RETURNING id, status, max_attempts
      )
      SELECT id, status, max_attempts FROM inserted
      UNION ALL
      SELECT id, status, max_attempts FROM outbound_deliveries WHERE id IN ${db(rows.map((r) => r.id))}`;
    // A row another transaction inserted after this statement's snapshot (the same event
    // dispatched twice at once) is neither inserted nor seen: a new statement sees it committed.
    const seen = new Set(stored.map((r) => r.id));
    const missing = rows.map((r) => r.id).filter((id) => !seen.has(id));
    if (missing.length) {
      stored.push(...(await db<{ id: string; status: DeliveryStatus; max_attempts: number }[]>`
        SELECT id, status, max_attempts FROM outbound_deliveries WHERE id IN ${db(missing)}`));
    }
    return stored.map((r) => ({ id: r.id, status: r.status, maxAttempts: r.max_attempts }));
  }

  async get(db: Queryable, id: string): Promise<DeliveryRecord | null> {
    const [row] = await db<DeliveryRow[]>`SELECT * FROM outbound_deliveries WHERE id = ${id}`;
    return row ? toDelivery(row) : null;
  }

  /**
   * Stores one attempt (idempotent per attempt number) and, when `finalStatus` is given, closes
   * the delivery. A delivery deleted meanwhile (its webhook was removed) or settled already (a
   * second run after a crash) is left alone.
   */
  async recordAttempt(db: Queryable, id: string, attempt: number, result: AttemptResult, finalStatus: DeliveryStatus | null): Promise<void> {
    // One statement (one round trip, atomic): the row lock of `target` orders concurrent records.
    await db`
      WITH target AS (
        SELECT id FROM outbound_deliveries WHERE id = ${id} AND status = 'pending' FOR UPDATE
      ), stored AS (
        INSERT INTO outbound_delivery_attempts (delivery_id, attempt, outcome, status_code, error, duration_ms, started_at)
        SELECT id, ${attempt}::int, ${result.outcome}::text, ${result.statusCode}::int, ${result.error}::text, ${result.durationMs}::int, ${result.startedAt}::timestamptz FROM target
        ON CONFLICT (delivery_id, attempt) DO UPDATE
          SET outcome = EXCLUDED.outcome, status_code = EXCLUDED.status_code, error = EXCLUDED.error,
              duration_ms = EXCLUDED.duration_ms, started_at = EXCLUDED.started_at
      )
      UPDATE outbound_deliveries d
      SET attempt_count = GREATEST(d.attempt_count, ${attempt}),
          last_status_code = ${result.statusCode},
          last_error = ${result.error},
          status = COALESCE(${finalStatus}, d.status),
          -- A given URL's secret is kept only while attempts may still need it.
          signing_secret = CASE WHEN ${finalStatus}::text IS NULL THEN d.signing_secret ELSE NULL END,
          completed_at = CASE WHEN ${finalStatus}::text IS NULL THEN d.completed_at ELSE clock_timestamp() END
      FROM target WHERE d.id = target.id`;
  }

  /** Deletes finished deliveries (and their attempts) completed before the cutoff. */
  async pruneFinishedBefore(db: Queryable, cutoff: Date): Promise<number> {
    const deleted = await db`DELETE FROM outbound_deliveries WHERE completed_at IS NOT NULL AND completed_at < ${cutoff}`;
    return deleted.count;
  }

  async attempts(db: Queryable, ids: string[]): Promise<Map<string, DeliveryAttempt[]>> {
    const byDelivery = new Map<string, DeliveryAttempt[]>(ids.map((id) => [id, []]));
    if (!ids.length) return byDelivery;
    const rows = await db<AttemptRow[]>`
      SELECT * FROM outbound_delivery_attempts WHERE delivery_id IN ${db(ids)} ORDER BY delivery_id, attempt`;
    for (const row of rows) byDelivery.get(row.delivery_id)?.push(toAttempt(row));
    return byDelivery;
  }

  /** Newest first; `before` is the id of the last delivery of the previous page. */
  async listForWebhook(db: Queryable, webhookId: string, opts: { limit: number; before?: string }): Promise<DeliveryRecord[]> {
    const cursor = opts.before ? await this.get(db, opts.before) : null;
    const rows = cursor
      ? await db<DeliveryRow[]>`
          SELECT * FROM outbound_deliveries
          WHERE webhook_id = ${webhookId} AND (created_at, id) < (${cursor.createdAt}::timestamptz, ${cursor.id})
          ORDER BY created_at DESC, id DESC LIMIT ${opts.limit}`
      : await db<DeliveryRow[]>`
          SELECT * FROM outbound_deliveries WHERE webhook_id = ${webhookId}
          ORDER BY created_at DESC, id DESC LIMIT ${opts.limit}`;
    return rows.map(toDelivery);
  }
}

/** How long the delivery log keeps a finished delivery. */
export const DELIVERY_RETENTION_DAYS = 30;
const PRUNE_EVERY_MS = 3600_000;

/** Lane signals one queue keeps in flight at once: bounded so a burst cannot swamp Temporal. */
export const MAX_SIGNALS_IN_FLIGHT = 32;

/** The lane workflow of a delivery target: one per webhook, alert channel, or batch to a given URL. */
export function laneIdFor(target: DeliveryTarget): string {
  switch (target.kind) {
    case 'webhook':
      return `lane:webhook:${target.webhookId}`;
    case 'alert_channel':
      return `lane:channel:${target.channelId}`;
    case 'url':
      return `lane:batch:${target.batchId}`;
  }
}

/** Hands deliveries to Temporal; once handed over, retries and backoff no longer depend on this process. */
export class DeliveryQueue {
  private lastPrune = 0;
  private readonly signals = pLimit(MAX_SIGNALS_IN_FLIGHT);

  constructor(
    private readonly temporal: Temporal,
    private readonly sql: Sql,
    readonly store: DeliveryStore,
  ) {}

  /** One delivery; see enqueueMany. */
  async enqueue(d: NewDelivery): Promise<{ deliveryId: string; queued: boolean }> {
    const [result] = await this.enqueueMany([d]);
    return result;
  }

  /**
   * Records the deliveries (one statement), then signals each target's lane once with its
   * pending deliveries, in order (starting the lane when it is not running). Safe to call again
   * for the same (target, event): the delivery id is derived from both, a settled delivery is not
   * queued again, and a lane runs a delivery it already has only once. Resolves once every lane
   * holds its deliveries durably, so a caller that saw it resolve may forget the events.
   */
  async enqueueMany(ds: NewDelivery[]): Promise<{ deliveryId: string; queued: boolean }[]> {
    this.pruneNowAndThen();
    const items = ds.map((delivery) => ({ id: deliveryIdFor(delivery.target, delivery.eventId), delivery }));
    const stored = new Map((await this.store.createMany(this.sql, items)).map((r) => [r.id, r]));
    const lanes = new Map<string, QueuedDelivery[]>();
    const results = items.map(({ id, delivery }) => {
      const record = stored.get(id);
      if (!record) throw new Error(`delivery ${id} vanished while being created`);
      if (record.status !== 'pending') return { deliveryId: id, queued: false };
      const lane = laneIdFor(delivery.target);
      const queued = lanes.get(lane) ?? [];
      if (!queued.some((q) => q.deliveryId === id)) queued.push({ deliveryId: id, maxAttempts: record.maxAttempts });
      lanes.set(lane, queued);
      return { deliveryId: id, queued: true };
    });
    await Promise.all([...lanes].map(([laneId, queued]) => this.signals(() => this.signalLane(laneId, queued))));
    return results;
  }

  private async signalLane(laneId: string, queued: QueuedDelivery[]): Promise<void> {
    await signalWithStartWorkflow(this.temporal, DELIVERY_LANE, { pending: [] }, {
      workflowId: laneId,
      signal: deliveriesQueuedSignal,
      signalArgs: [DELIVERIES_QUEUED_ARGS.parse(queued)],
    });
  }

  /** Keeps the log bounded without a timer of its own: at most one sweep per hour per process, off the request path. */
  private pruneNowAndThen() {
    const now = Date.now();
    if (now - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = now;
    this.store.pruneFinishedBefore(this.sql, new Date(now - DELIVERY_RETENTION_DAYS * 86_400_000)).catch(() => {
      this.lastPrune = 0; // try again with the next delivery
    });
  }

  /**
   * Polls the delivery until it is settled (or the timeout), then returns the stored record. A
   * request that waits here (an export, a test send) answers with the outcome by design, so its
   * deadline (docs/operations.md#faults-and-recovery) moves past the wait.
   */
  async settle(deliveryId: string, timeoutMs: number): Promise<DeliveryRecord | null> {
    const deadline = Date.now() + timeoutMs;
    currentDeadline()?.extendTo(deadline + SETTLE_MARGIN_MS);
    for (;;) {
      const record = await this.store.get(this.sql, deliveryId);
      if (!record || record.status !== 'pending' || Date.now() >= deadline) return record;
      await new Promise((resolve) => setTimeout(resolve, SETTLE_POLL_MS));
    }
  }
}

const SETTLE_POLL_MS = 100;
/** Room after the wait for the last read and the answer. */
const SETTLE_MARGIN_MS = 2_000;
