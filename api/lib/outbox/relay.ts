import { randomUUID } from 'node:crypto';
import type { Cache } from '../../infra/cache';
import { isBackendUnavailable } from '../../infra/deadline';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { COHORT_CHANGES_CHANNEL, isCohortChangeEvent } from '../../features/cohorts/types';
import { FLAG_CHANGES_CHANNEL, type FlagChangeEvent } from '../../features/flags/types';
import { BUS_CONSUMER, OUTBOX_CHANNEL, OutboxStore, type OutboxRow } from './store';

/**
 * Work that must happen once per committed flag change (publish to the bus, start webhook
 * deliveries …). Each consumer has its own relay loop, position and retry: a slow or failing one
 * delays only itself. `handle` may run more than once for an event (a retry after a failure, a
 * relay that died mid-batch), so it must be idempotent, e.g. keyed by `event.id`. Throwing makes
 * the consumer's loop retry the event later with backoff, holding back only that consumer's later
 * events of the same flag.
 */
export interface OutboxConsumer {
  name: string;
  handle(event: FlagChangeEvent): Promise<void>;
  /**
   * Optional: all of one flag's claimed events at once, in order (one round of work for a burst
   * of changes instead of one per change). A throw retries every one of them, so it must be as
   * idempotent as `handle`.
   */
  handleMany?(events: FlagChangeEvent[]): Promise<void>;
}

export interface OutboxRelayOptions {
  sql: Sql;
  cache: Cache;
  logger: Logger;
  /** Identifies this relay's leases; defaults to a random id. */
  owner?: string;
  /**
   * Sleep between polls when nothing woke the loop: a commit wakes it (`nudge` in this process,
   * the outbox notification with `listen`), and a retry wakes it when due, so this poll only
   * catches what no wake announced (a crashed relay's lease running out). A full batch is
   * followed at once by the next one.
   */
  pollIntervalMs?: number;
  /**
   * Wake on the notification every outbox insert sends at commit (Postgres LISTEN on a
   * connection of its own), so commits of other processes are relayed at once. Off on PGlite,
   * which serves one connection to its one process, where every commit nudges.
   */
  listen?: boolean;
  batchSize?: number;
  /**
   * How long a claimed batch stays this relay's without renewal: a relay renews it every third
   * of it while it works, so a relay that dies (SIGKILL) is replaced within this time.
   */
  leaseMs?: number;
  /** Retry delay after the n-th failed attempt: base * 2^(n-1), capped. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Events every consumer is past are kept this long (for inspection), then pruned. */
  retentionMs?: number;
  /** Streams (flags) worked on in parallel within a consumer's batch. */
  concurrency?: number;
}

export interface OutboxConsumerStats {
  handled: number;
  failures: number;
}

export interface OutboxRelayStats {
  running: boolean;
  consumers: Record<string, OutboxConsumerStats>;
}

const PRUNE_EVERY_MS = 60_000;
const OUTAGE_RETRY_MAX_MS = 2_000;

interface FailedEvent {
  row: OutboxRow;
  error: string;
  /** It failed because a backend was unreachable or too slow, not because of the event. */
  outage: boolean;
}

/** First wait after a failed pass (the database is away), doubled per failure up to 5 s. */
const ERROR_BACKOFF_BASE_MS = 50;
const ERROR_BACKOFF_MAX_MS = 5_000;

type LoopOptions = Required<Omit<OutboxRelayOptions, 'sql' | 'cache' | 'logger' | 'owner' | 'listen'>>;

/**
 * Runs every consumer of committed outbox events, each in its own loop: the bus publish (built
 * in, first) and the registered ones. A restarted relay resumes each consumer from whatever it
 * has not done. Safe to run on every control replica: the loops of one consumer share its work
 * through leases.
 */
export class OutboxRelay {
  private readonly store = new OutboxStore();
  private readonly consumers: OutboxConsumer[];
  private readonly owner: string;
  private readonly opts: LoopOptions;
  private loops: ConsumerLoop[] = [];
  private pruneTimer?: NodeJS.Timeout;
  private listening?: Promise<{ unlisten(): Promise<void> } | undefined>;

  constructor(private readonly deps: OutboxRelayOptions) {
    this.owner = deps.owner ?? `relay-${randomUUID()}`;
    this.opts = {
      pollIntervalMs: deps.pollIntervalMs ?? 5_000,
      batchSize: deps.batchSize ?? 256,
      leaseMs: deps.leaseMs ?? 15_000,
      retryBaseMs: deps.retryBaseMs ?? 500,
      retryMaxMs: deps.retryMaxMs ?? 60_000,
      retentionMs: deps.retentionMs ?? 24 * 3600_000,
      concurrency: deps.concurrency ?? 16,
    };
    // Cohort changes share the outbox (enqueueCohortEvent, pending for this consumer only) and go to their own channel.
    const channelOf = (event: FlagChangeEvent) => (isCohortChangeEvent(event) ? COHORT_CHANGES_CHANNEL : FLAG_CHANGES_CHANNEL);
    this.consumers = [{ name: BUS_CONSUMER, handle: (event) => deps.cache.publish(channelOf(event), JSON.stringify(event)).then(() => undefined) }];
  }

  /** Register every consumer before `start`. A consumer gets the events committed after it first started somewhere. */
  register(consumer: OutboxConsumer): void {
    if (this.loops.length) throw new Error(`outbox consumer "${consumer.name}" registered after the relay started`);
    if (this.consumers.some((c) => c.name === consumer.name)) throw new Error(`outbox consumer "${consumer.name}" registered twice`);
    this.consumers.push(consumer);
  }

  get consumerNames(): string[] {
    return this.consumers.map((c) => c.name);
  }

  start(): void {
    if (this.loops.length) return;
    this.loops = this.consumers.map((consumer) => new ConsumerLoop(consumer, this.deps.sql, this.store, this.owner, this.opts, this.deps.logger));
    for (const loop of this.loops) loop.start();
    if (this.deps.listen) {
      // Also on every (re)connection of the listening connection: commits while it was away are relayed then.
      this.listening = this.deps.sql.listen(OUTBOX_CHANNEL, () => this.nudge(), () => this.nudge()).catch((error: unknown) => {
        this.deps.logger.warn({ err: error }, 'listening for outbox commits failed; other processes\' commits wait for the poll');
        return undefined;
      });
    }
    this.pruneTimer = setInterval(() => {
      this.store.prune(this.deps.sql, this.opts.retentionMs).catch((error) => this.deps.logger.warn({ err: error }, 'pruning the outbox failed'));
    }, PRUNE_EVERY_MS);
    this.pruneTimer.unref();
  }

  /** Each consumer finishes the batch in hand, then stops. */
  async stop(): Promise<void> {
    clearInterval(this.pruneTimer);
    const listening = await this.listening;
    this.listening = undefined;
    await listening?.unlisten().catch((error: unknown) => this.deps.logger.warn({ err: error }, 'ending the outbox listener failed'));
    const loops = this.loops.splice(0);
    await Promise.all(loops.map((l) => l.stop()));
  }

  /** A change just committed (here, or in another process when listening): every consumer polls now. */
  nudge(): void {
    for (const loop of this.loops) loop.nudge();
  }

  stats(): OutboxRelayStats {
    return { running: this.loops.length > 0, consumers: Object.fromEntries(this.loops.map((l) => [l.consumer.name, l.stats()])) };
  }

  /** Pending work per consumer in the table (all relays), for health output. */
  backlog() {
    return this.store.stats(this.deps.sql);
  }
}

/** One consumer's loop: its own claims, backoff after failures, and idle polling. */
class ConsumerLoop {
  private running = false;
  private loop?: Promise<void>;
  private wake?: () => void;
  private nudged = false;
  private registered = false;
  /** When events this loop gave back for a retry become claimable again (local clock). */
  private retriesDue: number[] = [];
  private readonly counters: OutboxConsumerStats = { handled: 0, failures: 0 };

  constructor(
    readonly consumer: OutboxConsumer,
    private readonly sql: Sql,
    private readonly store: OutboxStore,
    private readonly owner: string,
    private readonly opts: LoopOptions,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
  }

  nudge(): void {
    this.nudged = true;
    this.wake?.();
  }

  stats(): OutboxConsumerStats {
    return { ...this.counters };
  }

  private async run(): Promise<void> {
    let consecutiveErrors = 0;
    while (this.running) {
      let claimed = 0;
      const passStartedAt = Date.now();
      try {
        claimed = await this.runOnce();
        consecutiveErrors = 0;
      } catch (error) {
        // The database is away: back off instead of logging every poll.
        consecutiveErrors++;
        this.logger.error({ err: error, consumer: this.consumer.name, consecutiveErrors }, 'outbox relay pass failed');
      }
      if (!this.running) break;
      if (consecutiveErrors) await this.sleep(Math.min(ERROR_BACKOFF_MAX_MS, ERROR_BACKOFF_BASE_MS * 2 ** consecutiveErrors), false);
      else if (claimed >= this.opts.batchSize) continue;
      else await this.sleep(claimed === 0 ? this.idleWait(passStartedAt) : 0);
    }
  }

  /**
   * Until the next retry this loop scheduled, at most the fallback poll. A retry is forgotten
   * only once a pass that began after it was due has run: a pass that began just before (its
   * claim found the row not yet available) and ended after must not drop it, or the retry
   * would wait for the poll.
   */
  private idleWait(passStartedAt: number): number {
    const now = Date.now();
    this.retriesDue = this.retriesDue.filter((due) => due > passStartedAt);
    return Math.min(this.opts.pollIntervalMs, ...this.retriesDue.map((due) => Math.max(0, due - now)));
  }

  /** Waits `ms`, or less when nudged (if `nudgeable`) or stopped. */
  private sleep(ms: number, nudgeable = true): Promise<void> {
    if (nudgeable && this.nudged) {
      this.nudged = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = () => {
        if (!nudgeable && this.running) return;
        this.nudged = false;
        done();
      };
    });
  }

  /** One batch: claim, handle in order per flag, record the outcome. Returns how many were claimed. */
  private async runOnce(): Promise<number> {
    const name = this.consumer.name;
    if (!this.registered) {
      await this.store.register(this.sql, name);
      this.registered = true;
    }
    const rows = await this.store.claim(this.sql, name, this.owner, this.opts.batchSize, this.opts.leaseMs);
    if (!rows.length) return 0;
    const streams = new Map<string, OutboxRow[]>();
    for (const row of rows) {
      const list = streams.get(row.stream);
      if (list) list.push(row);
      else streams.set(row.stream, [row]);
    }

    const done: number[] = [];
    const failed: FailedEvent[] = [];
    const notAttempted: number[] = [];
    // A slow consumer (a webhook dispatch waiting on Temporal) keeps its lease while it works,
    // so the lease itself can be short and a dead relay's events are taken over soon.
    const renewal = setInterval(() => {
      const settled = new Set([...done, ...failed.map((f) => f.row.seq), ...notAttempted]);
      const inHand = rows.map((r) => r.seq).filter((seq) => !settled.has(seq));
      this.store.extend(this.sql, name, this.owner, inHand, this.opts.leaseMs).catch((error) => this.logger.warn({ err: error, consumer: name }, 'renewing an outbox lease failed'));
    }, Math.max(100, Math.floor(this.opts.leaseMs / 3)));
    try {
      await this.handleStreams(streams, done, failed, notAttempted);
    } finally {
      clearInterval(renewal);
    }

    await this.store.markDone(this.sql, name, done);
    this.counters.handled += done.length;
    await this.store.release(this.sql, name, notAttempted);
    for (const f of failed) {
      this.counters.failures++;
      const retryInMs = this.retryDelay(f.row.attempts, f.outage);
      await this.store.markFailed(this.sql, name, f.row.seq, { error: f.error, retryInMs });
      // Counted from after the update, and a millisecond more: Date.now() is whole milliseconds
      // and the database's clock is finer, so a pass started at exactly the due millisecond could
      // still find the row unavailable and drop the retry until the poll.
      this.retriesDue.push(Date.now() + retryInMs + 1);
    }
    return rows.length;
  }

  private async handleStreams(streams: Map<string, OutboxRow[]>, done: number[], failed: FailedEvent[], notAttempted: number[]): Promise<void> {
    const name = this.consumer.name;
    const handleMany = this.consumer.handleMany?.bind(this.consumer);
    await forEachLimited([...streams.values()], this.opts.concurrency, async (events) => {
      if (handleMany && events.length > 1) {
        try {
          await handleMany(events.map((row) => row.event));
          done.push(...events.map((row) => row.seq));
        } catch (error) {
          // The first event carries the failure (and its backoff); the rest wait behind it, in order.
          failed.push({ row: events[0], error: message(error), outage: isBackendUnavailable(error) });
          notAttempted.push(...events.slice(1).map((r) => r.seq));
          this.logger.warn({ err: error, consumer: name, eventId: events[0].event.id, events: events.length }, 'outbox consumer failed; will retry');
        }
        return;
      }
      // Within a flag: strictly in order, and nothing after an event that failed.
      for (let i = 0; i < events.length; i++) {
        const row = events[i];
        try {
          await this.consumer.handle(row.event);
          done.push(row.seq);
        } catch (error) {
          failed.push({ row, error: message(error), outage: isBackendUnavailable(error) });
          notAttempted.push(...events.slice(i + 1).map((r) => r.seq));
          this.logger.warn({ err: error, consumer: name, eventId: row.event.id, attempt: row.attempts }, 'outbox consumer failed; will retry');
          return;
        }
      }
    });
  }

  /**
   * A failure because a backend was away retries at least every OUTAGE_RETRY_MAX_MS, so the
   * backlog drains soon after the backend is back (docs/operations.md#faults-and-recovery).
   */
  private retryDelay(attempts: number, outage: boolean): number {
    const cap = outage ? Math.min(OUTAGE_RETRY_MAX_MS, this.opts.retryMaxMs) : this.opts.retryMaxMs;
    return Math.min(cap, this.opts.retryBaseMs * 2 ** Math.max(0, attempts - 1));
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function forEachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]);
  });
  await Promise.all(workers);
}
