import type { Sql, TransactionSql } from '../../infra/postgres';
import type { FlagChangeEvent } from '../flags/types';

/** A claimed outbox row, as the relay works on it. */
export interface OutboxRow {
  seq: number;
  event: FlagChangeEvent;
  /** The bus publish already succeeded on an earlier attempt. */
  published: boolean;
  consumersDone: string[];
  attempts: number;
  /** Events of one flag share a stream; the bus sees them in seq order. */
  stream: string;
}

interface ClaimedRow {
  seq: string;
  payload: FlagChangeEvent;
  published_at: Date | null;
  consumers_done: string[];
  attempts: number;
  service_id: string;
  environment: string;
  flag_key: string;
}

/** Inserts one event in the writer's transaction, so it commits (or not) with the change. */
export function enqueueFlagEvent(tx: TransactionSql, event: FlagChangeEvent): Promise<void> {
  return enqueueFlagEvents(tx, [event]);
}

/**
 * Inserts events in the writer's transaction, in one statement, taking sequence numbers in the
 * given order: the relay publishes each flag's events in that order.
 */
export async function enqueueFlagEvents(tx: TransactionSql, events: FlagChangeEvent[]): Promise<void> {
  if (!events.length) return;
  await tx`
    INSERT INTO flag_outbox (id, project_id, service_id, environment, flag_key, event, payload)
    SELECT e->>'id', e->'data'->>'projectId', e->'data'->>'serviceId', e->'data'->>'environment', e->'data'->>'flagKey', e->>'event', e
    FROM jsonb_array_elements(${tx.json(events as never)}) WITH ORDINALITY AS t(e, n) ORDER BY n`;
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

/** The relay's queries. Every one is a single short statement: no transaction is held while consumers run. */
export class OutboxStore {
  constructor(private readonly sql: Sql) {}

  /**
   * Leases up to `limit` uncompleted, available events to `owner` for `leaseMs`. SKIP LOCKED lets
   * several relays claim side by side; an event whose flag still has an earlier unpublished event
   * held elsewhere (leased by another relay, or waiting for a retry) is left for later, so the bus
   * sees each flag's events in order.
   */
  async claim(owner: string, limit: number, leaseMs: number): Promise<OutboxRow[]> {
    const rows = await this.sql<ClaimedRow[]>`
      WITH candidates AS MATERIALIZED (
        SELECT seq, service_id, environment, flag_key, published_at FROM flag_outbox
        WHERE completed_at IS NULL AND available_at <= clock_timestamp()
        ORDER BY seq LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ), claimable AS (
        SELECT c.seq FROM candidates c
        WHERE c.published_at IS NOT NULL OR NOT EXISTS (
          SELECT 1 FROM flag_outbox o
          WHERE o.service_id = c.service_id AND o.environment = c.environment AND o.flag_key = c.flag_key
            AND o.published_at IS NULL AND o.seq < c.seq AND o.seq NOT IN (SELECT seq FROM candidates))
      )
      UPDATE flag_outbox f
      SET available_at = clock_timestamp() + ${leaseMs}::float8 * interval '1 millisecond', claimed_by = ${owner}, attempts = f.attempts + 1
      FROM claimable WHERE f.seq = claimable.seq
      RETURNING f.seq, f.payload, f.published_at, f.consumers_done, f.attempts, f.service_id, f.environment, f.flag_key`;
    return rows
      .map((r) => ({
        seq: Number(r.seq),
        event: r.payload,
        published: r.published_at !== null,
        consumersDone: r.consumers_done,
        attempts: r.attempts,
        stream: `${r.service_id}\u0000${r.environment}\u0000${r.flag_key}`,
      }))
      .sort((a, b) => a.seq - b.seq);
  }

  async markPublished(seqs: number[]): Promise<void> {
    if (!seqs.length) return;
    await this.sql`UPDATE flag_outbox SET published_at = clock_timestamp() WHERE seq = ANY(${seqs}::bigint[]) AND published_at IS NULL`;
  }

  async markCompleted(seqs: number[]): Promise<void> {
    if (!seqs.length) return;
    await this.sql`
      UPDATE flag_outbox SET completed_at = clock_timestamp(), published_at = COALESCE(published_at, clock_timestamp()),
        claimed_by = NULL, last_error = NULL
      WHERE seq = ANY(${seqs}::bigint[])`;
  }

  /** Gives the event back for a later attempt, remembering which consumers already succeeded. */
  async markFailed(seq: number, f: { consumersDone: string[]; error: string; retryInMs: number }): Promise<void> {
    await this.sql`
      UPDATE flag_outbox SET available_at = clock_timestamp() + ${f.retryInMs}::float8 * interval '1 millisecond',
        consumers_done = ${this.sql.array(f.consumersDone)}::text[], last_error = ${f.error.slice(0, 2000)}, claimed_by = NULL
      WHERE seq = ${seq}`;
  }

  /** Drops completed events older than the retention, a bounded number per call. */
  async prune(olderThanMs: number, limit = 5000): Promise<number> {
    const rows = await this.sql`
      DELETE FROM flag_outbox WHERE seq IN (
        SELECT seq FROM flag_outbox WHERE completed_at < clock_timestamp() - ${olderThanMs}::float8 * interval '1 millisecond' LIMIT ${limit})`;
    return rows.count;
  }

  async stats(): Promise<{ pending: number; failing: number; oldestPendingAgeMs: number | null }> {
    const [row] = await this.sql<{ pending: number; failing: number; oldest_ms: number | null }[]>`
      SELECT count(*)::int AS pending, count(*) FILTER (WHERE last_error IS NOT NULL)::int AS failing,
             (EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)) * 1000)::float8 AS oldest_ms
      FROM flag_outbox WHERE completed_at IS NULL`;
    return { pending: row.pending, failing: row.failing, oldestPendingAgeMs: row.oldest_ms };
  }
}
