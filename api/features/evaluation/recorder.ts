import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Analytics } from '../../../analytics/client';
import type { Logger } from '../../infra/logger';

export type EvaluationSource = 'rest' | 'ofrep' | 'connect' | 'grpc-web';

/** One evaluation as the request path hands it over: cheap to build, nothing serialized yet. */
export interface EvaluationEvent {
  timestamp: number;
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
  reason: string;
  variant: string | undefined;
  value: unknown;
  latencyMs: number;
  errorCode: string | undefined;
  targetingKey: string | undefined;
  source: EvaluationSource;
}

export interface RecorderOptions {
  analytics: Analytics;
  logger: Logger;
  /** Rows per insert; a full batch is flushed at once. */
  batchSize: number;
  /** A partial batch waits at most this long. */
  flushIntervalMs: number;
  /** Events held in memory (buffer plus the batch being inserted); beyond it new events are dropped and counted. */
  maxBuffered: number;
  /** Attempts per batch before it is dropped (and counted). */
  maxAttempts: number;
  retryBaseMs: number;
}

export interface RecorderStats {
  /** False while the latest insert attempt failed. */
  healthy: boolean;
  buffered: number;
  inFlight: number;
  written: number;
  dropped: number;
  failedBatches: number;
  lastFlushAt: string | null;
  lastError: string | null;
}

const TABLE = 'evaluation_events';
/** Rows serialized per event-loop turn: a big batch never blocks requests for long. */
const ROWS_PER_TURN = 500;
/** One insert is one string in chDB's connection (and one HTTP body to a server): keep it well under V8's string limit. */
const MAX_ROWS_PER_INSERT = 200_000;
const HASHES_KEPT = 50_000;

/**
 * The evaluation event writer (DESIGN data flow 3): requests push events into an in-memory
 * buffer and never wait; one insert at a time drains it to ClickHouse in batches of
 * `batchSize` rows (JSONEachRow), when a batch is full or every `flushIntervalMs`.
 * Memory is bounded by `maxBuffered` events; a failed insert is retried with exponential
 * backoff up to `maxAttempts`, then the batch is dropped. Every dropped event is counted
 * (stats, /api/health/evaluation). `close` flushes everything before the process exits.
 */
export class EvaluationRecorder {
  private buffer: EvaluationEvent[] = [];
  private inFlight = 0;
  private timer?: NodeJS.Timeout;
  private flushing?: Promise<void>;
  private closed = false;
  /** targetingKey -> hash, so a key seen again is not hashed again (keys repeat across flags). */
  private readonly hashes = new Map<string, string>();
  private readonly counters = { written: 0, dropped: 0, failedBatches: 0 };
  private lastFlushAt: string | null = null;
  private lastError: string | null = null;
  private healthy = true;

  constructor(private readonly opts: RecorderOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.opts.flushIntervalMs);
    this.timer.unref();
  }

  /** Never blocks and never throws: the request path calls this per evaluation. */
  record(event: EvaluationEvent): void {
    if (this.buffer.length + this.inFlight >= this.opts.maxBuffered) {
      this.counters.dropped++;
      return;
    }
    this.buffer.push(event);
    if (this.buffer.length >= this.opts.batchSize && !this.flushing && !this.closed) {
      setImmediate(() => void this.flush());
    }
  }

  /** Drains the buffer now (GET /api/evaluations reads its own writes); resolves when it is empty or dropped. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.buffer.length === 0) return Promise.resolve();
    this.flushing = this.drain().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.flushing;
    await this.flush();
  }

  /** Forgets buffered events of a flag that are not written yet (DELETE /api/evaluations). */
  discard(predicate: (e: EvaluationEvent) => boolean): void {
    this.buffer = this.buffer.filter((e) => !predicate(e));
  }

  stats(): RecorderStats {
    return {
      healthy: this.healthy,
      buffered: this.buffer.length,
      inFlight: this.inFlight,
      ...this.counters,
      lastFlushAt: this.lastFlushAt,
      lastError: this.lastError,
    };
  }

  private async drain(): Promise<void> {
    while (this.buffer.length > 0) {
      const size = Math.min(this.opts.batchSize, MAX_ROWS_PER_INSERT);
      const batch = this.buffer.length <= size ? this.buffer : this.buffer.slice(0, size);
      this.buffer = batch === this.buffer ? [] : this.buffer.slice(batch.length);
      this.inFlight = batch.length;
      try {
        await this.insertWithRetry(batch);
        this.counters.written += batch.length;
        this.lastFlushAt = new Date().toISOString();
      } catch (error) {
        this.counters.failedBatches++;
        this.counters.dropped += batch.length;
        this.lastError = (error as Error).message;
        this.opts.logger.error({ err: error, events: batch.length }, 'dropping a batch of evaluation events after retries');
      } finally {
        this.inFlight = 0;
      }
    }
  }

  private async insertWithRetry(batch: EvaluationEvent[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.opts.analytics.client.insert({ table: TABLE, values: this.rows(batch), format: 'JSONEachRow' });
        this.healthy = true;
        return;
      } catch (error) {
        this.lastError = (error as Error).message;
        this.healthy = false;
        if (attempt >= this.opts.maxAttempts || this.closed) throw error;
        this.opts.logger.warn({ err: error, attempt }, 'evaluation event insert failed; retrying');
        await new Promise((r) => setTimeout(r, this.opts.retryBaseMs * 2 ** (attempt - 1)));
      }
    }
  }

  /**
   * The batch as a stream of rows, ROWS_PER_TURN at a time with a setImmediate between turns,
   * so requests keep being served while a large batch is serialized.
   */
  private rows(batch: EvaluationEvent[]): Readable {
    let next = 0;
    let scheduled = false;
    const stream: Readable = new Readable({
      objectMode: true,
      read: () => {
        if (scheduled) return;
        scheduled = true;
        setImmediate(() => {
          scheduled = false;
          const end = Math.min(next + ROWS_PER_TURN, batch.length);
          for (; next < end; next++) stream.push(this.toRow(batch[next]));
          if (next >= batch.length) stream.push(null);
        });
      },
    });
    return stream;
  }

  private toRow(e: EvaluationEvent): Record<string, unknown> {
    return {
      timestamp: e.timestamp,
      project_id: e.projectId,
      service_id: e.serviceId,
      environment: e.environment,
      flag_key: e.flagKey,
      reason: e.reason,
      variant: e.variant ?? '',
      value: e.value === undefined ? 'null' : JSON.stringify(e.value),
      latency_ms: e.latencyMs,
      error_code: e.errorCode ?? '',
      targeting_key_hash: e.targetingKey ? this.hash(e.targetingKey) : '',
      source: e.source,
    };
  }

  private hash(targetingKey: string): string {
    let h = this.hashes.get(targetingKey);
    if (h === undefined) {
      h = hashTargetingKey(targetingKey);
      if (this.hashes.size >= HASHES_KEPT) this.hashes.clear();
      this.hashes.set(targetingKey, h);
    }
    return h;
  }
}

/** First 16 bytes of SHA-256 in hex: the documented, reproducible form stored in ClickHouse. */
export function hashTargetingKey(targetingKey: string): string {
  return createHash('sha256').update(targetingKey).digest('hex').slice(0, 32);
}
