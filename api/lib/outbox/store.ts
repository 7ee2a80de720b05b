import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { CohortChangeEvent } from '../../features/cohorts/types';
import type { FlagChangeEvent } from '../../features/flags/types';

/** A consumer's claimed pending row, as its relay works on it. */
export interface OutboxRow {
  seq: number;
  event: FlagChangeEvent;
  /** Claims of this row by this consumer so far, this one included. */
  attempts: number;
  /** Events of one flag share a stream; each consumer sees them in seq order. */
  stream: string;
}

interface ClaimedRow {
  seq: string;
  payload: FlagChangeEvent;
  attempts: number;
  service_id: string;
  environment: string;
  flag_key: string;
}

/**
 * The Postgres notification channel every outbox insert notifies in its transaction: delivered
 * at commit, it wakes the relays of other processes (docs/operations.md#resource-use-at-idle).
 */
export const OUTBOX_CHANNEL = 'flag_outbox';

/** Inserts one event in the writer's transaction, so it commits (or not) with the change. */
export function enqueueFlagEvent(tx: TransactionSql, event: FlagChangeEvent): Promise<void> {
  return enqueueFlagEvents(tx, [event]);
}

/**
 * Inserts events in the writer's transaction, in one statement, taking sequence numbers in the
 * given order (each consumer gets each flag's events in that order), with one pending row per
 * registered consumer.
 */
export async function enqueueFlagEvents(tx: TransactionSql, events: FlagChangeEvent[]): Promise<void> {
  if (!events.length) return;
  await tx`
    WITH inserted AS (
      INSERT INTO flag_outbox (id, project_id, service_id, environment, flag_key, event, payload)
      SELECT e->>'id', e->'data'->>'projectId', e->'data'->>'serviceId', e->'data'->>'environment', e->'data'->>'flagKey', e->>'event', e
      FROM jsonb_array_elements(${tx.json(events as never)}) WITH ORDINALITY AS t(e, n) ORDER BY n
      RETURNING seq, service_id, environment, flag_key
    ),
    pending AS (
      INSERT INTO flag_outbox_pending (consumer, seq, service_id, environment, flag_key)
      SELECT c.name, i.seq, i.service_id, i.environment, i.flag_key FROM inserted i CROSS JOIN outbox_consumers c
      -- The alert-channel consumer takes change request events only: no pending row for every flag change.
      WHERE c.name <> ${CHANGE_REQUEST_ALERTS_CONSUMER}
      RETURNING 1
    )
    SELECT pg_notify(${OUTBOX_CHANNEL}, '') WHERE EXISTS (SELECT 1 FROM pending)`;
}

/** The consumer that publishes to the bus: every replica's snapshots, SSE and gRPC-Web streams. */
export const BUS_CONSUMER = 'bus';

/**
 * Inserts a cohort change in the writer's transaction, pending for the bus consumer only (the
 * relay publishes it on the cohort channel; webhooks and the other consumers handle flag events).
 * Its stream is the cohort, so each cohort's changes are published in order.
 */
export async function enqueueCohortEvent(tx: TransactionSql, event: CohortChangeEvent): Promise<void> {
  await tx`
    WITH inserted AS (
      INSERT INTO flag_outbox (id, project_id, service_id, environment, flag_key, event, payload)
      VALUES (${event.id}, ${event.projectId}, '', 'cohort', ${event.cohortId}, ${event.event}, ${tx.json(event as never)})
      RETURNING seq, service_id, environment, flag_key
    ),
    pending AS (
      INSERT INTO flag_outbox_pending (consumer, seq, service_id, environment, flag_key)
      SELECT ${BUS_CONSUMER}, seq, service_id, environment, flag_key FROM inserted
      RETURNING 1
    )
    SELECT pg_notify(${OUTBOX_CHANNEL}, '') WHERE EXISTS (SELECT 1 FROM pending)`;
}

/** The consumer that delivers to project webhooks (WebhookDispatcher). */
export const WEBHOOKS_CONSUMER = 'webhooks';
/** The consumer that tells organization alert channels of change request steps (ChangeRequestAlerts). */
export const CHANGE_REQUEST_ALERTS_CONSUMER = 'change-request-alerts';

/** A change request's step as webhooks receive it (docs/change-requests.md#webhooks-and-audit). */
export interface ChangeRequestEvent {
  id: string;
  event: `change_request.${string}`;
  timestamp: string;
  data: { projectId: string; changeRequestId: string; changeRequest: unknown };
}

/**
 * Inserts a change request's event in the writer's transaction, pending for the webhooks and
 * alert-channel consumers only (nothing else serves or judges it); its stream is the request, so
 * each request's events are delivered in order.
 */
export async function enqueueChangeRequestEvent(tx: TransactionSql, event: ChangeRequestEvent): Promise<void> {
  await tx`
    WITH inserted AS (
      INSERT INTO flag_outbox (id, project_id, service_id, environment, flag_key, event, payload)
      VALUES (${event.id}, ${event.data.projectId}, '', 'change_request', ${event.data.changeRequestId}, ${event.event}, ${tx.json(event as never)})
      RETURNING seq, service_id, environment, flag_key
    ),
    pending AS (
      INSERT INTO flag_outbox_pending (consumer, seq, service_id, environment, flag_key)
      SELECT c.name, i.seq, i.service_id, i.environment, i.flag_key FROM inserted i
      JOIN outbox_consumers c ON c.name IN (${WEBHOOKS_CONSUMER}, ${CHANGE_REQUEST_ALERTS_CONSUMER})
      RETURNING 1
    )
    SELECT pg_notify(${OUTBOX_CHANNEL}, '') WHERE EXISTS (SELECT 1 FROM pending)`;
}

/** The outbox as a dependency of flag writers: they take it in their constructor, tests pass a fake. */
export interface FlagEventOutbox {
  enqueue(tx: TransactionSql, events: FlagChangeEvent[]): Promise<void>;
}

/** The outbox in Postgres (flag_outbox), written in the caller's transaction. */
export class OutboxWriter implements FlagEventOutbox {
  enqueue(tx: TransactionSql, events: FlagChangeEvent[]): Promise<void> {
    return enqueueFlagEvents(tx, events);
  }
}

/**
 * The relays' queries, each for one consumer. Every one is a single short statement: no
 * transaction is held while a consumer runs.
 */
export class OutboxStore {
  /** From now on every committed event gets a pending row for `consumer`. */
  async register(db: Queryable, consumer: string): Promise<void> {
    await db`INSERT INTO outbox_consumers (name) VALUES (${consumer}) ON CONFLICT (name) DO NOTHING`;
  }

  /**
   * Leases up to `limit` of `consumer`'s available pending events to `owner` for `leaseMs`. SKIP
   * LOCKED lets several relays of a consumer claim side by side; an event whose flag still has an
   * earlier event pending for this consumer and held elsewhere (leased by another relay, or
   * waiting for a retry) is left for later, so the consumer sees each flag's events in order.
   */
  async claim(db: Queryable, consumer: string, owner: string, limit: number, leaseMs: number): Promise<OutboxRow[]> {
    const rows = await db<ClaimedRow[]>`
      WITH candidates AS MATERIALIZED (
        SELECT seq, service_id, environment, flag_key FROM flag_outbox_pending
        WHERE consumer = ${consumer} AND available_at <= clock_timestamp()
        ORDER BY seq LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ), claimable AS (
        SELECT c.seq FROM candidates c
        WHERE NOT EXISTS (
          SELECT 1 FROM flag_outbox_pending o
          WHERE o.consumer = ${consumer} AND o.service_id = c.service_id AND o.environment = c.environment AND o.flag_key = c.flag_key
            AND o.seq < c.seq AND o.seq NOT IN (SELECT seq FROM candidates))
      )
      UPDATE flag_outbox_pending p
      SET available_at = clock_timestamp() + ${leaseMs}::float8 * interval '1 millisecond', claimed_by = ${owner}, attempts = p.attempts + 1
      FROM claimable JOIN flag_outbox f ON f.seq = claimable.seq
      WHERE p.consumer = ${consumer} AND p.seq = claimable.seq
      RETURNING p.seq, f.payload, p.attempts, p.service_id, p.environment, p.flag_key`;
    return rows
      .map((r) => ({
        seq: Number(r.seq),
        event: r.payload,
        attempts: r.attempts,
        stream: `${r.service_id}\u0000${r.environment}\u0000${r.flag_key}`,
      }))
      .sort((a, b) => a.seq - b.seq);
  }

  /** The consumer handled these events: they are no longer its work. */
  async markDone(db: Queryable, consumer: string, seqs: number[]): Promise<void> {
    if (!seqs.length) return;
    await db`DELETE FROM flag_outbox_pending WHERE consumer = ${consumer} AND seq = ANY(${seqs}::bigint[])`;
  }

  /** Gives the event back to the consumer for a later attempt. */
  async markFailed(db: Queryable, consumer: string, seq: number, f: { error: string; retryInMs: number }): Promise<void> {
    await db`
      UPDATE flag_outbox_pending SET available_at = clock_timestamp() + ${f.retryInMs}::float8 * interval '1 millisecond',
        last_error = ${f.error.slice(0, 2000)}, claimed_by = NULL
      WHERE consumer = ${consumer} AND seq = ${seq}`;
  }

  /** Keeps `owner`'s lease on events it is still working on for another `leaseMs`. */
  async extend(db: Queryable, consumer: string, owner: string, seqs: number[], leaseMs: number): Promise<void> {
    if (!seqs.length) return;
    await db`
      UPDATE flag_outbox_pending SET available_at = clock_timestamp() + ${leaseMs}::float8 * interval '1 millisecond'
      WHERE consumer = ${consumer} AND claimed_by = ${owner} AND seq = ANY(${seqs}::bigint[])`;
  }

  /** Gives back claimed events that were not attempted (an earlier event of their flag failed). */
  async release(db: Queryable, consumer: string, seqs: number[]): Promise<void> {
    if (!seqs.length) return;
    await db`
      UPDATE flag_outbox_pending SET available_at = clock_timestamp(), claimed_by = NULL, attempts = attempts - 1
      WHERE consumer = ${consumer} AND seq = ANY(${seqs}::bigint[])`;
  }

  /**
   * Drops events older than the retention that every consumer is past (below each one's lowest
   * pending seq), a bounded number per call.
   */
  async prune(db: Queryable, olderThanMs: number, limit = 5000): Promise<number> {
    const rows = await db`
      WITH horizon AS (
        -- One index probe per consumer; no pending rows at all: NULL, everything is past.
        SELECT min((SELECT min(p.seq) FROM flag_outbox_pending p WHERE p.consumer = c.name)) AS seq FROM outbox_consumers c
      )
      DELETE FROM flag_outbox WHERE seq IN (
        SELECT f.seq FROM flag_outbox f, horizon
        WHERE f.created_at < clock_timestamp() - ${olderThanMs}::float8 * interval '1 millisecond'
          AND (horizon.seq IS NULL OR f.seq < horizon.seq)
        LIMIT ${limit})`;
    return rows.count;
  }

  /** Pending work per registered consumer (all relays), for health output. */
  async stats(db: Queryable): Promise<{ consumer: string; pending: number; failing: number; oldestPendingAgeMs: number | null }[]> {
    const rows = await db<{ consumer: string; pending: number; failing: number; oldest_ms: number | null }[]>`
      SELECT c.name AS consumer, count(p.seq)::int AS pending, count(p.last_error)::int AS failing,
             (EXTRACT(EPOCH FROM clock_timestamp() - min(p.created_at)) * 1000)::float8 AS oldest_ms
      FROM outbox_consumers c LEFT JOIN flag_outbox_pending p ON p.consumer = c.name
      GROUP BY c.name ORDER BY c.name`;
    return rows.map((r) => ({ consumer: r.consumer, pending: r.pending, failing: r.failing, oldestPendingAgeMs: r.oldest_ms }));
  }
}
