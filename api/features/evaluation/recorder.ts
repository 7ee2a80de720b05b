import { Readable } from 'node:stream';
import type { Analytics } from '../../../analytics/client';
import { boundedMemo, sha256Hex } from '../../infra/ids';
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
/** Rows per serialized chunk. */
const ROWS_PER_CHUNK = 500;
/** Fresh events serialized per event-loop turn at most, so a burst never blocks requests for long. */
const MAX_ROWS_SERIALIZED_PER_TURN = 4 * ROWS_PER_CHUNK;
/** One insert is one string in chDB's connection (and one HTTP body to a server): keep it well under V8's string limit. */
const MAX_ROWS_PER_INSERT = 200_000;
/**
 * Inserts running at once: while ClickHouse (chDB's own threads, or a server) takes one batch,
 * the next one is serialized on the event loop, so the two overlap instead of alternating.
 */
const PARALLEL_INSERTS = 2;
/** The TabSeparated columns, in the order toRow writes them. */
const COLUMNS = [
  'timestamp', 'project_id', 'service_id', 'environment', 'flag_key', 'reason',
  'variant', 'value', 'latency_ms', 'error_code', 'targeting_key_hash', 'source',
] as const;
const HASHES_KEPT = 50_000;
/** The longest wait between two tries of a batch. */
const MAX_RETRY_DELAY_MS = 5_000;

/** Which buffered events DELETE /api/evaluations removes before they are written. */
export interface DiscardFilter {
  projectIds: ReadonlySet<string>;
  serviceId?: string;
  flagKey: string;
}

/** Serialized rows waiting for an insert: one flat string. */
interface Chunk {
  text: string;
  rows: number;
}

/**
 * The evaluation event writer (DESIGN data flow 3): requests push events into an in-memory
 * buffer and never wait; up to PARALLEL_INSERTS inserts drain it to ClickHouse in batches of
 * `batchSize` rows, when a batch is full or every `flushIntervalMs`.
 *
 * Events become TabSeparated text within one event-loop turn of arriving (`serialize`), so
 * what waits for an insert is a few flat strings, not hundreds of thousands of objects: at
 * 200,000 events/s, tracing buffered event objects in the old generation was most of the
 * writer's cost. Memory is bounded by `maxBuffered` events; a failed insert is retried with
 * exponential backoff up to `maxAttempts`, then the batch is dropped; while the analytics schema
 * is not there yet (a data plane started before the control plane that owns it), batches wait
 * for it without spending attempts, and `maxBuffered` still bounds the wait. Every dropped event is
 * counted (stats, /api/health/evaluation). `close` flushes everything before the process exits.
 */
export class EvaluationRecorder {
  /** Events of the current turn, not serialized yet. */
  private fresh: EvaluationEvent[] = [];
  /** Serialized rows of the chunk being filled. */
  private openRows: string[] = [];
  private chunks: Chunk[] = [];
  /** Events in `fresh`, `openRows` and `chunks`. */
  private buffered = 0;
  private inFlight = 0;
  private serializeScheduled = false;
  private timer?: NodeJS.Timeout;
  private flushing?: Promise<void>;
  private closed = false;
  /** A targeting key seen again is not hashed again (keys repeat across flags). */
  private readonly hash = boundedMemo(hashTargetingKey, HASHES_KEPT);
  private readonly counters = { written: 0, dropped: 0, failedBatches: 0 };
  private lastFlushAt: string | null = null;
  private lastError: string | null = null;
  private healthy = true;

  /** Rows per chunk: never more than a batch, so batches keep their size. */
  private readonly chunkRows: number;

  constructor(private readonly opts: RecorderOptions) {
    this.chunkRows = Math.max(1, Math.min(ROWS_PER_CHUNK, opts.batchSize));
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.opts.flushIntervalMs);
    this.timer.unref();
  }

  /** Never blocks and never throws: the request path calls this per evaluation. */
  record(event: EvaluationEvent): void {
    if (this.buffered + this.inFlight >= this.opts.maxBuffered) {
      this.counters.dropped++;
      return;
    }
    this.fresh.push(event);
    this.buffered++;
    if (!this.serializeScheduled) {
      this.serializeScheduled = true;
      setImmediate(this.serializeFresh);
    }
    if (this.buffered >= this.opts.batchSize && !this.flushing && !this.closed) {
      setImmediate(() => void this.flush());
    }
  }

  /** Drains the buffer now (GET /api/evaluations reads its own writes); resolves when it is empty or dropped. */
  flush(): Promise<void> {
    if (!this.flushing && this.buffered === 0) return Promise.resolve();
    // Flushes run one after another, each writing what was waiting when it began: a caller
    // whose events arrived during a running flush still gets them written before it resolves.
    const flushing: Promise<void> = (this.flushing ?? Promise.resolve()).then(() => this.drain()).finally(() => {
      if (this.flushing === flushing) this.flushing = undefined;
    });
    this.flushing = flushing;
    return flushing;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.flushing;
    await this.flush();
  }

  /** Forgets buffered events of a flag that are not written yet (DELETE /api/evaluations). */
  discard(filter: DiscardFilter): void {
    this.serializeAll();
    const projects = new Set([...filter.projectIds].map(tsv));
    const service = filter.serviceId === undefined ? undefined : tsv(filter.serviceId);
    const flag = tsv(filter.flagKey);
    const kept: Chunk[] = [];
    for (const chunk of this.chunks) {
      const lines = chunk.text.split('\n');
      lines.pop();
      const left = lines.filter((line) => {
        const [, project, serviceId, , flagKey] = line.split('\t', 5);
        return !(flagKey === flag && projects.has(project) && (service === undefined || serviceId === service));
      });
      this.buffered -= lines.length - left.length;
      if (left.length) kept.push({ text: left.join('\n') + '\n', rows: left.length });
    }
    this.chunks = kept;
  }

  stats(): RecorderStats {
    return {
      healthy: this.healthy,
      buffered: this.buffered,
      inFlight: this.inFlight,
      ...this.counters,
      lastFlushAt: this.lastFlushAt,
      lastError: this.lastError,
    };
  }

  private readonly serializeFresh = () => {
    this.serializeScheduled = false;
    this.serialize(MAX_ROWS_SERIALIZED_PER_TURN);
    if (this.fresh.length > 0) {
      this.serializeScheduled = true;
      setImmediate(this.serializeFresh);
    }
  };

  /**
   * Turns up to `limit` fresh events into rows; every `chunkRows` rows become one chunk (a flat
   * string). A trickle of a few events per turn thus still makes 500-row chunks, not thousands
   * of tiny ones.
   */
  private serialize(limit: number): void {
    const events = this.fresh;
    const count = Math.min(limit, events.length);
    for (let i = 0; i < count; i++) {
      this.openRows.push(this.toRow(events[i]));
      if (this.openRows.length === this.chunkRows) this.sealOpenRows();
    }
    this.fresh = count === events.length ? [] : events.slice(count);
  }

  /** Everything serialized and in `chunks` (before a batch is taken or a discard looks). */
  private serializeAll(): void {
    this.serialize(this.fresh.length);
    this.sealOpenRows();
  }

  private sealOpenRows(): void {
    if (this.openRows.length === 0) return;
    this.chunks.push({ text: this.openRows.join(''), rows: this.openRows.length });
    this.openRows = [];
  }

  /**
   * Writes the events waiting when it began, plus any full batch that fills meanwhile. Events
   * trickling in during the inserts wait for the next flush: otherwise a steady trickle keeps
   * a tiny insert always running, and chDB's per-insert work (parts, the rollup view, merges)
   * costs more CPU than serving the requests.
   */
  private async drain(): Promise<void> {
    let due = this.buffered;
    const running = new Set<Promise<void>>();
    for (;;) {
      while (running.size < PARALLEL_INSERTS && this.buffered > 0 && (due > 0 || this.buffered >= this.opts.batchSize)) {
        const batch = this.takeBatch(Math.min(this.opts.batchSize, MAX_ROWS_PER_INSERT));
        due -= batch.rows;
        this.inFlight += batch.rows;
        const insert: Promise<void> = this.insertBatch(batch).finally(() => {
          this.inFlight -= batch.rows;
          running.delete(insert);
        });
        running.add(insert);
      }
      if (running.size === 0) return;
      await Promise.race(running);
    }
  }

  /** Whole chunks up to about `size` rows (at least one chunk), out of the buffer. */
  private takeBatch(size: number): { texts: string[]; rows: number } {
    this.serializeAll();
    const texts: string[] = [];
    let rows = 0;
    let taken = 0;
    while (taken < this.chunks.length && (rows === 0 || rows + this.chunks[taken].rows <= size)) {
      texts.push(this.chunks[taken].text);
      rows += this.chunks[taken].rows;
      taken++;
    }
    this.chunks = this.chunks.slice(taken);
    this.buffered -= rows;
    return { texts, rows };
  }

  private async insertBatch(batch: { texts: string[]; rows: number }): Promise<void> {
    try {
      await this.insertWithRetry(batch.texts);
      this.counters.written += batch.rows;
      this.lastFlushAt = new Date().toISOString();
    } catch (error) {
      this.counters.failedBatches++;
      this.counters.dropped += batch.rows;
      this.lastError = (error as Error).message;
      this.opts.logger.error({ err: error, events: batch.rows }, 'dropping a batch of evaluation events after retries');
    }
  }

  private async insertWithRetry(texts: string[]): Promise<void> {
    let failures = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        const values = Readable.from(texts, { objectMode: false, encoding: 'utf8' });
        await this.opts.analytics.client.insert({ table: TABLE, values, format: 'TabSeparated', columns: [...COLUMNS] });
        this.healthy = true;
        return;
      } catch (error) {
        this.lastError = (error as Error).message;
        this.healthy = false;
        const awaitingSchema = isSchemaMissing(error);
        if (!awaitingSchema) failures++;
        if (failures >= this.opts.maxAttempts || this.closed) throw error;
        this.opts.logger.warn(
          { err: error, attempt },
          awaitingSchema ? 'analytics schema not there yet (the control plane or npm run migrate creates it); waiting' : 'evaluation event insert failed; retrying',
        );
        await new Promise((r) => setTimeout(r, Math.min(this.opts.retryBaseMs * 2 ** Math.min(attempt - 1, 16), MAX_RETRY_DELAY_MS)));
      }
    }
  }

  private toRow(e: EvaluationEvent): string {
    const seconds = Math.floor(e.timestamp / 1000);
    const millis = e.timestamp - seconds * 1000;
    return (
      `${seconds}.${String(millis).padStart(3, '0')}\t${tsv(e.projectId)}\t${tsv(e.serviceId)}\t${tsv(e.environment)}` +
      `\t${tsv(e.flagKey)}\t${tsv(e.reason)}\t${e.variant === undefined ? '' : tsv(e.variant)}` +
      `\t${e.value === undefined ? 'null' : tsv(JSON.stringify(e.value))}\t${e.latencyMs}\t${e.errorCode === undefined ? '' : tsv(e.errorCode)}` +
      `\t${e.targetingKey ? this.hash(e.targetingKey) : ''}\t${e.source}\n`
    );
  }

}

/** First 16 bytes of SHA-256 in hex: the documented, reproducible form stored in ClickHouse. */
export function hashTargetingKey(targetingKey: string): string {
  return sha256Hex(targetingKey).slice(0, 32);
}

const TSV_SPECIAL = /[\\\t\n\r\0]/;
const TSV_SPECIALS = /[\\\t\n\r\0]/g;
const TSV_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0' };

/** A string as a TabSeparated field: backslash, tab, newline, carriage return and NUL escaped. */
export function tsv(value: string): string {
  return TSV_SPECIAL.test(value) ? value.replace(TSV_SPECIALS, (c) => TSV_ESCAPES[c]) : value;
}

/** ClickHouse's answer while the schema's owner has not created the table (or the database) yet. */
function isSchemaMissing(error: unknown): boolean {
  const type = (error as { type?: unknown } | null)?.type;
  return type === 'UNKNOWN_TABLE' || type === 'UNKNOWN_DATABASE';
}
