import { randomUUID } from 'node:crypto';
import type { Logger } from '../api/infra/logger';
import type { Analytics } from './client';
import type { AnalyticsRows, AnalyticsSink, AnalyticsTable } from './rows';

/** How one table's rows become TabSeparated text. */
export interface TableFormat<R> {
  /** The table the insert names. */
  table: string;
  /** The table the rows are stored in, when `table` is a landing table whose view writes them there: what stats and logs name. */
  stores?: string;
  /** The columns in the order `line` writes them. */
  columns: [string, ...string[]];
  /** The row as one TabSeparated line, newline included. */
  line(row: R): string;
}

export interface WriterSettings {
  /** Rows per insert; a full batch is flushed at once. */
  batchSize: number;
  /** A partial batch waits at most this long. */
  flushIntervalMs: number;
  /** Rows held in memory (buffer plus the batches being inserted); beyond it new rows are refused and counted. */
  maxBuffered: number;
  /** Attempts per batch before it is dropped (and counted). */
  maxAttempts: number;
  retryBaseMs: number;
}

export interface TableWriterOptions extends WriterSettings {
  analytics: Analytics;
  logger: Logger;
  /** Names this process in every batch's deduplication token; a random one when not given. */
  instanceId?: string;
}

export interface TableWriterStats {
  /** False while the latest insert attempt failed. */
  healthy: boolean;
  buffered: number;
  /** Serialized rows waiting (rows not serialized yet are counted in `buffered` only). */
  bufferedBytes: number;
  inFlight: number;
  written: number;
  /** Inserts that succeeded. */
  batches: number;
  dropped: number;
  failedBatches: number;
  lastFlushAt: string | null;
  lastError: string | null;
}

/**
 * Bytes allocated at a time for the open chunk, which seals when it is full. Chunks are filled,
 * not cut short by a row count: a 128 KB buffer sealed a quarter full was copied out and dropped,
 * and that churn of memory outside the heap (about 25 MB/s at 18,000 new users a second, five
 * rows a line) made V8 run full collections to reclaim it (docs/data-plane.md, Evaluation events).
 */
const BYTES_PER_CHUNK = 128 * 1024;
/** Rows per chunk at most (and never more than a batch, so batches keep their size). */
const MAX_ROWS_PER_CHUNK = 20_000;
/** Fresh rows serialized per event-loop turn at most, so a burst never blocks requests for long. */
const MAX_ROWS_SERIALIZED_PER_TURN = 2_000;
/** One insert is one string in chDB's connection (and one HTTP body to a server): keep it well under V8's string limit. */
const MAX_ROWS_PER_INSERT = 200_000;
/**
 * Inserts running at once: while ClickHouse (chDB's own threads, or a server) takes one batch,
 * the next one is serialized on the event loop, so the two overlap instead of alternating.
 */
const PARALLEL_INSERTS = 2;
/** The longest wait between two tries of a batch. */
const MAX_RETRY_DELAY_MS = 5_000;

/**
 * Serialized rows waiting for an insert, as UTF-8 bytes: off the JavaScript heap, so the seconds
 * a chunk waits for its flush cost the garbage collector nothing (as strings, the young
 * generation's scavenges copied them and the old generation's collections moved them).
 */
interface Chunk {
  bytes: Buffer;
  rows: number;
}

interface Batch {
  chunks: Buffer[];
  rows: number;
  /** The same on every try of this batch, so ClickHouse stores it once (raw table and rollups). */
  dedupToken: string;
}

/**
 * The batched ClickHouse writer every analytics producer shares (docs/architecture.md#data-flow),
 * one per table: producers push rows into an in-memory buffer and never wait; up to
 * PARALLEL_INSERTS inserts drain it in batches of `batchSize` rows, when a batch is full or every
 * `flushIntervalMs`.
 *
 * Rows become TabSeparated text within one event-loop turn of arriving (`serialize`), so what
 * waits for an insert is a few buffers, not hundreds of thousands of objects: at 200,000
 * events/s, tracing buffered row objects in the old generation was most of the writer's cost.
 * Memory is bounded by `maxBuffered` rows (`record` answers false beyond it); a failed insert is
 * retried with exponential backoff up to `maxAttempts`, then the batch is dropped; while the
 * analytics schema is not there yet (a data plane started before the control plane that owns
 * it), batches wait for it without spending attempts, and `maxBuffered` still bounds the wait.
 * Every refused or dropped row is counted (stats). `close` flushes everything.
 *
 * A retried batch never counts twice: each batch carries an `insert_deduplication_token`
 * (instance, table, batch number) that stays the same on every try, and the tables keep a
 * deduplication window (analytics/schema), so an insert that ClickHouse stored but whose answer
 * was lost is ignored when tried again, in the table and in the rollups its views feed.
 */
export class TableWriter<R> {
  /** Rows of the current turn, not serialized yet. */
  private fresh: R[] = [];
  /** The chunk being filled (serialized lines and recordBytes' rows), its bytes used and its rows. */
  private open: Buffer | undefined;
  private openUsed = 0;
  private openRows = 0;
  private chunks: Chunk[] = [];
  /** Rows in `fresh`, `open` and `chunks`. */
  private buffered = 0;
  private inFlight = 0;
  private serializeScheduled = false;
  private flushScheduled = false;
  private timer?: NodeJS.Timeout;
  private flushing?: Promise<void>;
  private closed = false;
  private batchSequence = 0;
  private readonly instanceId: string;
  private readonly counters = { written: 0, batches: 0, dropped: 0, failedBatches: 0 };
  private lastFlushAt: string | null = null;
  private lastError: string | null = null;
  private healthy = true;
  /** Rows per chunk: never more than a batch, so batches keep their size. */
  private readonly chunkRows: number;

  constructor(
    readonly format: TableFormat<R>,
    private readonly opts: TableWriterOptions,
  ) {
    this.chunkRows = Math.max(1, Math.min(MAX_ROWS_PER_CHUNK, opts.batchSize));
    this.instanceId = opts.instanceId ?? randomUUID();
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.opts.flushIntervalMs);
    this.timer.unref();
  }

  /** Rows `record` would take now: what the memory bound leaves. */
  room(): number {
    return Math.max(0, this.opts.maxBuffered - this.buffered - this.inFlight);
  }

  /** Never blocks and never throws: false when the memory bound refused the row (counted as dropped). */
  record(row: R): boolean {
    if (this.buffered + this.inFlight >= this.opts.maxBuffered) {
      this.counters.dropped++;
      return false;
    }
    this.fresh.push(row);
    this.buffered++;
    if (!this.serializeScheduled) {
      this.serializeScheduled = true;
      setImmediate(this.serializeFresh);
    }
    this.flushWhenFull();
    return true;
  }

  /**
   * `record` for a producer that keeps its lines as bytes (the evaluation recorder: a request's
   * fields, then a part per flag, each made once): the parts are copied into the chunk being
   * filled one after another, so the line never exists as a string. `rows` is what the line
   * stands for in the table the insert ends in (a request's line: a row per flag), which the
   * memory bound and the batch size count.
   */
  protected recordBytes(parts: readonly Buffer[], rows: number): boolean {
    if (this.buffered + this.inFlight >= this.opts.maxBuffered) {
      this.counters.dropped += rows;
      return false;
    }
    let length = 0;
    for (let i = 0; i < parts.length; i++) length += parts[i].length;
    const open = this.reserve(length);
    for (let i = 0; i < parts.length; i++) this.openUsed += parts[i].copy(open, this.openUsed);
    this.buffered += rows;
    this.rowAdded(rows);
    this.flushWhenFull();
    return true;
  }

  /**
   * A full batch is flushed on the next turn, once however many rows arrive before it: the rows
   * buffered, not what a subclass holds back (its `flush` hands that over too).
   */
  private flushWhenFull(): void {
    if (this.buffered < this.opts.batchSize || this.flushing || this.closed || this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flushBuffered();
    });
  }

  /** Drains the buffer now (a reader wanting its own writes); resolves when it is empty or dropped. */
  flush(): Promise<void> {
    return this.flushBuffered();
  }

  private flushBuffered(): Promise<void> {
    if (!this.flushing && this.buffered === 0) return Promise.resolve();
    // Flushes run one after another, each writing what was waiting when it began: a caller
    // whose rows arrived during a running flush still gets them written before it resolves.
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

  stats(): TableWriterStats {
    return {
      healthy: this.healthy,
      buffered: this.buffered,
      bufferedBytes: this.chunks.reduce((n, chunk) => n + chunk.bytes.length, 0) + this.openUsed,
      inFlight: this.inFlight,
      ...this.counters,
      lastFlushAt: this.lastFlushAt,
      lastError: this.lastError,
    };
  }

  /**
   * Rewrites buffered lines before they are written: `rewrite` answers the line to keep (newline
   * left out) and the rows it stands for, or undefined to forget it.
   */
  protected rewriteLines(rewrite: (line: string) => { line: string; rows: number } | undefined): void {
    this.serializeAll();
    const kept: Chunk[] = [];
    for (const chunk of this.chunks) {
      const lines = chunk.bytes.toString('utf8').split('\n');
      lines.pop();
      const left: string[] = [];
      let rows = 0;
      for (const line of lines) {
        const rewritten = rewrite(line);
        if (rewritten === undefined) continue;
        left.push(rewritten.line);
        rows += rewritten.rows;
      }
      this.buffered -= chunk.rows - rows;
      if (left.length) kept.push({ bytes: Buffer.from(left.join('\n') + '\n', 'utf8'), rows });
    }
    this.chunks = kept;
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
   * Turns up to `limit` fresh rows into lines in the open chunk, which seals when full (or at
   * `chunkRows` rows). A trickle of a few rows per turn thus still makes full chunks, not
   * thousands of tiny ones.
   */
  private serialize(limit: number): void {
    const rows = this.fresh;
    const line = this.format.line;
    const count = Math.min(limit, rows.length);
    for (let i = 0; i < count; i++) {
      const text = line(rows[i]);
      const open = this.reserve(Buffer.byteLength(text, 'utf8'));
      this.openUsed += open.write(text, this.openUsed, 'utf8');
      this.rowAdded();
    }
    this.fresh = count === rows.length ? [] : rows.slice(count);
  }

  /** The open chunk with room for `length` more bytes (the full one sealed first). */
  private reserve(length: number): Buffer {
    if (this.open === undefined || this.openUsed + length > this.open.length) {
      this.sealOpen();
      this.open = Buffer.allocUnsafe(Math.max(BYTES_PER_CHUNK, length));
    }
    return this.open;
  }

  private rowAdded(rows = 1): void {
    this.openRows += rows;
    if (this.openRows >= this.chunkRows) this.sealOpen();
  }

  /** Everything serialized and in `chunks` (before a batch is taken or a discard looks). */
  private serializeAll(): void {
    this.serialize(this.fresh.length);
    this.sealOpen();
  }

  private sealOpen(): void {
    if (this.open === undefined || this.openRows === 0) return;
    const filled = this.open.subarray(0, this.openUsed);
    // A chunk sealed early (a flush) keeps only what it holds, not the whole allocation.
    this.chunks.push({ bytes: this.openUsed < this.open.length / 2 ? Buffer.from(filled) : filled, rows: this.openRows });
    this.open = undefined;
    this.openUsed = 0;
    this.openRows = 0;
  }

  /**
   * Writes the rows waiting when it began, plus any full batch that fills meanwhile. Rows
   * trickling in during the inserts wait for the next flush: otherwise a steady trickle keeps
   * a tiny insert always running, and chDB's per-insert work (parts, the rollup views, merges)
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
  private takeBatch(size: number): Batch {
    this.serializeAll();
    const chunks: Buffer[] = [];
    let rows = 0;
    let taken = 0;
    while (taken < this.chunks.length && (rows === 0 || rows + this.chunks[taken].rows <= size)) {
      chunks.push(this.chunks[taken].bytes);
      rows += this.chunks[taken].rows;
      taken++;
    }
    this.chunks = this.chunks.slice(taken);
    this.buffered -= rows;
    return { chunks, rows, dedupToken: `${this.instanceId}:${this.format.table}:${++this.batchSequence}` };
  }

  private async insertBatch(batch: Batch): Promise<void> {
    try {
      await this.insertWithRetry(batch);
      this.counters.written += batch.rows;
      this.counters.batches++;
      this.lastFlushAt = new Date().toISOString();
    } catch (error) {
      this.counters.failedBatches++;
      this.counters.dropped += batch.rows;
      this.lastError = (error as Error).message;
      this.opts.logger.error({ err: error, table: this.format.stores ?? this.format.table, rows: batch.rows }, 'dropping a batch of analytics rows after retries');
    }
  }

  private async insertWithRetry(batch: Batch): Promise<void> {
    const { table, columns } = this.format;
    let failures = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.opts.analytics.insertTabSeparated({
          table,
          columns,
          chunks: batch.chunks,
          settings: { insert_deduplication_token: batch.dedupToken, deduplicate_blocks_in_dependent_materialized_views: 1 },
        });
        this.healthy = true;
        return;
      } catch (error) {
        this.lastError = (error as Error).message;
        this.healthy = false;
        const awaitingSchema = isSchemaMissing(error);
        if (!awaitingSchema) failures++;
        if (failures >= this.opts.maxAttempts || this.closed) throw error;
        this.opts.logger.warn(
          { err: error, attempt, table },
          awaitingSchema ? 'analytics schema not there yet (the control plane or npm run migrate creates it); waiting' : 'analytics insert failed; retrying',
        );
        await new Promise((r) => setTimeout(r, Math.min(this.opts.retryBaseMs * 2 ** Math.min(attempt - 1, 16), MAX_RETRY_DELAY_MS)));
      }
    }
  }
}

/**
 * ClickHouse's answer while the schema's owner has not created the table (or the database, or a
 * column a newer migration adds) yet.
 */
function isSchemaMissing(error: unknown): boolean {
  const type = (error as { type?: unknown } | null)?.type;
  return type === 'UNKNOWN_TABLE' || type === 'UNKNOWN_DATABASE' || type === 'NO_SUCH_COLUMN_IN_TABLE';
}

const TSV_SPECIAL = /[\\\t\n\r\0]/;
const TSV_SPECIALS = /[\\\t\n\r\0]/g;
const TSV_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0' };

/** A string as a TabSeparated field: backslash, tab, newline, carriage return and NUL escaped. */
export function tsv(value: string): string {
  return TSV_SPECIAL.test(value) ? value.replace(TSV_SPECIALS, (c) => TSV_ESCAPES[c]) : value;
}

/** Epoch milliseconds as a DateTime64(3) field: seconds and three decimals. */
export function tsvTime(epochMs: number): string {
  // Whole milliseconds (the columns' precision): a fractional one (performance.now() arithmetic)
  // would print as "x.12.5" and make ClickHouse refuse the whole batch, other producers' rows too.
  const ms = Math.round(epochMs);
  const seconds = Math.floor(ms / 1000);
  const millis = ms - seconds * 1000;
  return `${seconds}.${String(millis).padStart(3, '0')}`;
}

/** A Float64 field; ClickHouse spells the non-finite ones inf, -inf and nan. */
export function tsvFloat(value: number): string {
  if (Number.isFinite(value)) return String(value);
  return value > 0 ? 'inf' : value < 0 ? '-inf' : 'nan';
}

/** A Nullable(Float64) field: \N for null. */
export function tsvNullableFloat(value: number | null): string {
  return value === null ? '\\N' : tsvFloat(value);
}

/**
 * A UInt field. Producers hand counts as non-negative integers; anything else would make
 * ClickHouse refuse the whole batch (other producers' rows with it), so it is truncated into
 * range instead.
 */
export function tsvCount(value: number): string {
  if (Number.isSafeInteger(value) && value >= 0) return String(value);
  return String(Number.isFinite(value) ? Math.min(Math.max(Math.trunc(value), 0), Number.MAX_SAFE_INTEGER) : 0);
}

const QUOTED_SPECIAL = /[\\'\t\n\r\0]/;
const QUOTED_SPECIALS = /[\\'\t\n\r\0]/g;
const QUOTED_ESCAPES: Record<string, string> = { ...TSV_ESCAPES, "'": "\\'" };

/**
 * A string inside a composite field (a map's keys and values, an array's elements): quoted.
 * Inside TabSeparated, ClickHouse reads such quoted strings with their own escapes straight from
 * the line (no TabSeparated unescaping first), so tabs and newlines are escaped there and nothing
 * else.
 */
export function quoted(value: string): string {
  return `'${QUOTED_SPECIAL.test(value) ? value.replace(QUOTED_SPECIALS, (c) => QUOTED_ESCAPES[c]) : value}'`;
}

/** A Map(String, String) field: `{'key':'value',...}`, keys and values `quoted`. */
export function tsvMap(map: Record<string, string>): string {
  let text = '{';
  for (const key in map) {
    if (!Object.hasOwn(map, key)) continue;
    if (text.length > 1) text += ',';
    text += `${quoted(key)}:${quoted(map[key])}`;
  }
  return text + '}';
}

/** The line of each analytics/rows.ts table, columns in schema order (analytics/schema 020-024, 032). */
export const ROW_FORMATS: { [T in AnalyticsTable]: TableFormat<AnalyticsRows[T]> } = {
  outcome_events: {
    table: 'outcome_events',
    columns: ['timestamp', 'project_id', 'service_id', 'environment', 'event', 'targeting_key_hash', 'value', 'flags', 'origin', 'event_id'],
    line: (r) =>
      `${tsvTime(r.timestamp)}\t${tsv(r.projectId)}\t${tsv(r.serviceId)}\t${tsv(r.environment)}\t${tsv(r.event)}\t${tsv(r.targetingKeyHash)}` +
      `\t${tsvNullableFloat(r.value)}\t${tsvMap(r.flags)}\t${tsv(r.origin)}\t${tsv(r.eventId)}\n`,
  },
  sdk_telemetry: {
    table: 'sdk_telemetry',
    columns: ['timestamp', 'project_id', 'service_id', 'environment', 'flag_key', 'variant', 'evaluations', 'cache_hits', 'cache_misses', 'avg_latency_ms', 'event_id'],
    line: (r) =>
      `${tsvTime(r.timestamp)}\t${tsv(r.projectId)}\t${tsv(r.serviceId)}\t${tsv(r.environment)}\t${tsv(r.flagKey)}\t${tsv(r.variant)}` +
      `\t${tsvCount(r.evaluations)}\t${tsvCount(r.cacheHits)}\t${tsvCount(r.cacheMisses)}\t${tsvFloat(r.avgLatencyMs)}\t${tsv(r.eventId)}\n`,
  },
  sdk_diagnostics: {
    table: 'sdk_diagnostics',
    columns: ['timestamp', 'project_id', 'service_id', 'environment', 'total_evaluations', 'cache_hits', 'cache_hit_ratio', 'tracked_flags', 'event_id'],
    line: (r) =>
      `${tsvTime(r.timestamp)}\t${tsv(r.projectId)}\t${tsv(r.serviceId)}\t${tsv(r.environment)}\t${tsvCount(r.totalEvaluations)}` +
      `\t${tsvCount(r.cacheHits)}\t${tsvFloat(r.cacheHitRatio)}\t${tsvCount(r.trackedFlags)}\t${tsv(r.eventId)}\n`,
  },
  web_vitals: {
    table: 'web_vitals',
    columns: ['timestamp', 'project_id', 'service_id', 'environment', 'origin', 'name', 'value', 'rating', 'active_flags', 'session_id', 'url', 'event_id'],
    line: (r) =>
      `${tsvTime(r.timestamp)}\t${tsv(r.projectId)}\t${tsv(r.serviceId)}\t${tsv(r.environment)}\t${tsv(r.origin)}\t${tsv(r.name)}` +
      `\t${tsvFloat(r.value)}\t${tsv(r.rating)}\t${tsvMap(r.activeFlags)}\t${tsv(r.sessionId)}\t${tsv(r.url)}\t${tsv(r.eventId)}\n`,
  },
  client_errors: {
    table: 'client_errors',
    columns: ['timestamp', 'project_id', 'service_id', 'environment', 'origin', 'fingerprint', 'message', 'stack', 'active_flags', 'session_id', 'url', 'event_id'],
    line: (r) =>
      `${tsvTime(r.timestamp)}\t${tsv(r.projectId)}\t${tsv(r.serviceId)}\t${tsv(r.environment)}\t${tsv(r.origin)}\t${tsv(r.fingerprint)}` +
      `\t${tsv(r.message)}\t${tsv(r.stack)}\t${tsvMap(r.activeFlags)}\t${tsv(r.sessionId)}\t${tsv(r.url)}\t${tsv(r.eventId)}\n`,
  },
  browser_events: {
    table: 'browser_events',
    columns: [
      'timestamp', 'received_at', 'project_id', 'service_id', 'type', 'url', 'referrer', 'session_id', 'visitor_hash',
      'name', 'value', 'flags', 'data', 'country', 'browser', 'os', 'device', 'event_id',
    ],
    line: (r) =>
      `${tsvTime(r.timestamp)}\t${tsvTime(r.receivedAt)}\t${tsv(r.projectId)}\t${tsv(r.serviceId)}\t${tsv(r.type)}\t${tsv(r.url)}` +
      `\t${tsv(r.referrer)}\t${tsv(r.sessionId)}\t${tsv(r.visitorHash)}\t${tsv(r.name)}\t${tsvNullableFloat(r.value)}\t${tsvMap(r.flags)}` +
      `\t${tsv(r.data)}\t${tsv(r.country)}\t${tsv(r.browser)}\t${tsv(r.os)}\t${tsv(r.device)}\t${tsv(r.eventId)}\n`,
  },
  admin_events: {
    table: 'admin_events',
    columns: [
      'occurred_at', 'received_at', 'site_id', 'source', 'session_id', 'install_id', 'user_hash', 'event', 'project_id',
      'app_version', 'build_number', 'app_variant', 'platform', 'api_origin', 'properties', 'event_id',
    ],
    line: (r) =>
      `${tsvTime(r.occurredAt)}\t${tsvTime(r.receivedAt)}\t${tsv(r.siteId)}\t${tsv(r.source)}\t${tsv(r.sessionId)}\t${tsv(r.installId)}` +
      `\t${tsv(r.userHash)}\t${tsv(r.event)}\t${tsv(r.projectId)}\t${tsv(r.appVersion)}\t${tsv(r.buildNumber)}\t${tsv(r.appVariant)}` +
      `\t${tsv(r.platform)}\t${tsv(r.apiOrigin)}\t${tsv(r.properties)}\t${tsv(r.eventId)}\n`,
  },
  recent_contexts: {
    table: 'recent_contexts',
    columns: ['service_id', 'environment', 'targeting_key', 'attributes', 'seen_at'],
    line: (r) => `${tsv(r.serviceId)}\t${tsv(r.environment)}\t${tsv(r.targetingKey)}\t${tsv(r.attributes)}\t${tsvTime(r.seenAt)}\n`,
  },
};

/** A table writer of any row type, as the analytics writer starts, flushes, closes and reports it. */
export interface ManagedTableWriter {
  readonly format: { table: string; stores?: string };
  start(): void;
  flush(): Promise<void>;
  close(): Promise<void>;
  stats(): TableWriterStats;
}

/**
 * Every analytics table's writer in one place: the sink producers record into (one TableWriter
 * per table of analytics/rows.ts, sharing `settings`), plus writers with their own settings
 * (the evaluation events), so start, flush, close and health see them all.
 */
export class AnalyticsWriter implements AnalyticsSink {
  private readonly writers: { [T in AnalyticsTable]: TableWriter<AnalyticsRows[T]> };
  private readonly all: ManagedTableWriter[];

  constructor(opts: TableWriterOptions & { alongside?: ManagedTableWriter[] }) {
    const { alongside = [], ...options } = opts;
    const writer = <T extends AnalyticsTable>(table: T) => new TableWriter<AnalyticsRows[T]>(ROW_FORMATS[table], options);
    this.writers = {
      outcome_events: writer('outcome_events'),
      sdk_telemetry: writer('sdk_telemetry'),
      sdk_diagnostics: writer('sdk_diagnostics'),
      web_vitals: writer('web_vitals'),
      client_errors: writer('client_errors'),
      browser_events: writer('browser_events'),
      admin_events: writer('admin_events'),
      recent_contexts: writer('recent_contexts'),
    };
    this.all = [...alongside, ...Object.values(this.writers)];
  }

  record<T extends AnalyticsTable>(table: T, row: AnalyticsRows[T]): boolean {
    return (this.writers[table] as TableWriter<AnalyticsRows[T]>).record(row);
  }

  room(table: AnalyticsTable): number {
    return this.writers[table].room();
  }

  start(): void {
    for (const writer of this.all) writer.start();
  }

  /** Writes every table's buffered rows now (readers wanting their own writes, tests). */
  async flush(): Promise<void> {
    await Promise.all(this.all.map((writer) => writer.flush()));
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((writer) => writer.close()));
  }

  /** Writer state per table, for /api/health/admin. */
  stats(): Record<string, TableWriterStats> {
    return Object.fromEntries(this.all.map((writer) => [writer.format.stores ?? writer.format.table, writer.stats()]));
  }
}
