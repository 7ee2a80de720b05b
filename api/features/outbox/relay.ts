import { randomUUID } from 'node:crypto';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { FLAG_CHANGES_CHANNEL, type FlagChangeEvent } from '../flags/types';
import { OutboxStore, type OutboxRow } from './store';

/**
 * Work that must happen once per committed flag change (start webhook deliveries, guardrail
 * watches …). `handle` may run more than once for an event (a retry after a failure, a relay that
 * died mid-batch), so it must be idempotent, e.g. keyed by `event.id`. Throwing makes the relay
 * retry the event later with backoff; consumers that already succeeded are not run again.
 */
export interface OutboxConsumer {
  name: string;
  handle(event: FlagChangeEvent): Promise<void>;
}

export interface OutboxRelayOptions {
  sql: Sql;
  cache: Cache;
  logger: Logger;
  /** Identifies this relay's leases; defaults to a random id. */
  owner?: string;
  /** Sleep between polls when idle. A full batch is followed at once by the next one. */
  pollIntervalMs?: number;
  batchSize?: number;
  /** How long a claimed batch stays this relay's; a relay that dies is replaced after it. */
  leaseMs?: number;
  /** Retry delay after the n-th failed attempt: base * 2^(n-1), capped. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Completed events are kept this long (for inspection), then pruned. */
  retentionMs?: number;
  /** Streams (flags) worked on in parallel within a batch. */
  concurrency?: number;
}

export interface OutboxRelayStats {
  running: boolean;
  published: number;
  completed: number;
  failures: number;
}

const PRUNE_EVERY_MS = 60_000;

/**
 * Publishes committed outbox events to the bus (Redis pub/sub: every replica's snapshots, SSE and
 * gRPC-Web streams, watchers) and then runs the registered consumers. An event is completed only
 * after the bus publish and every consumer succeeded; failures are retried with backoff and a
 * restarted relay resumes from whatever is not completed. Safe to run on every control replica.
 */
export class OutboxRelay {
  private readonly store: OutboxStore;
  private readonly consumers: OutboxConsumer[] = [];
  private readonly owner: string;
  private readonly opts: Required<Omit<OutboxRelayOptions, 'sql' | 'cache' | 'logger' | 'owner'>>;
  private running = false;
  private loop?: Promise<void>;
  private wake?: () => void;
  private nudged = false;
  private lastPrune = 0;
  private readonly counters = { published: 0, completed: 0, failures: 0 };

  constructor(private readonly deps: OutboxRelayOptions) {
    this.store = new OutboxStore(deps.sql);
    this.owner = deps.owner ?? `relay-${randomUUID()}`;
    this.opts = {
      pollIntervalMs: deps.pollIntervalMs ?? 50,
      batchSize: deps.batchSize ?? 256,
      leaseMs: deps.leaseMs ?? 60_000,
      retryBaseMs: deps.retryBaseMs ?? 500,
      retryMaxMs: deps.retryMaxMs ?? 60_000,
      retentionMs: deps.retentionMs ?? 24 * 3600_000,
      concurrency: deps.concurrency ?? 16,
    };
  }

  /** Register every consumer before `start`: an event completed without a consumer never reaches it. */
  register(consumer: OutboxConsumer): void {
    if (this.running) throw new Error(`outbox consumer "${consumer.name}" registered after the relay started`);
    if (this.consumers.some((c) => c.name === consumer.name)) throw new Error(`outbox consumer "${consumer.name}" registered twice`);
    this.consumers.push(consumer);
  }

  get consumerNames(): string[] {
    return this.consumers.map((c) => c.name);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Finishes the batch in hand, then stops. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
    this.loop = undefined;
  }

  /** A change just committed in this process: poll now instead of at the next tick. */
  nudge(): void {
    this.nudged = true;
    this.wake?.();
  }

  stats(): OutboxRelayStats {
    return { running: this.running, ...this.counters };
  }

  /** Pending work in the table (all relays), for health output. */
  backlog() {
    return this.store.stats();
  }

  private async run(): Promise<void> {
    let consecutiveErrors = 0;
    while (this.running) {
      let claimed = 0;
      try {
        claimed = await this.runOnce();
        await this.pruneNowAndThen();
        consecutiveErrors = 0;
      } catch (error) {
        // The database or the bus is away: back off instead of logging every poll.
        consecutiveErrors++;
        this.deps.logger.error({ err: error, consecutiveErrors }, 'outbox relay pass failed');
      }
      if (!this.running) break;
      if (consecutiveErrors) await this.sleep(Math.min(5_000, this.opts.pollIntervalMs * 2 ** consecutiveErrors), false);
      else if (claimed >= this.opts.batchSize) continue;
      else await this.sleep(claimed === 0 ? this.opts.pollIntervalMs : 0);
    }
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

  /** One batch: claim, publish to the bus (in order per flag), run consumers, record the outcome. Returns how many were claimed. */
  async runOnce(): Promise<number> {
    const rows = await this.store.claim(this.owner, this.opts.batchSize, this.opts.leaseMs);
    if (!rows.length) return 0;
    const streams = new Map<string, OutboxRow[]>();
    for (const row of rows) {
      const list = streams.get(row.stream);
      if (list) list.push(row);
      else streams.set(row.stream, [row]);
    }

    const completed: number[] = [];
    const failed: { row: OutboxRow; consumersDone: string[]; error: string }[] = [];
    await forEachLimited([...streams.values()], this.opts.concurrency, async (events) => {
      // Within a flag: strictly in order, and nothing after an event whose bus publish failed.
      for (let i = 0; i < events.length; i++) {
        const row = events[i];
        if (!row.published) {
          try {
            await this.deps.cache.publish(FLAG_CHANGES_CHANNEL, JSON.stringify(row.event));
            row.published = true;
            this.counters.published++;
          } catch (error) {
            for (const rest of events.slice(i)) failed.push({ row: rest, consumersDone: rest.consumersDone, error: `bus publish: ${message(error)}` });
            return;
          }
        }
      }
    });
    const published = rows.filter((r) => r.published);
    // Recorded before consumers run: later events of these flags are unblocked for every relay.
    await this.store.markPublished(published.map((r) => r.seq));

    await forEachLimited([...streams.values()], this.opts.concurrency, async (events) => {
      for (const row of events) {
        if (!row.published) continue;
        const done = new Set(row.consumersDone);
        const errors: string[] = [];
        await Promise.all(
          this.consumers
            .filter((c) => !done.has(c.name))
            .map(async (consumer) => {
              try {
                await consumer.handle(row.event);
                done.add(consumer.name);
              } catch (error) {
                errors.push(`${consumer.name}: ${message(error)}`);
                this.deps.logger.warn({ err: error, consumer: consumer.name, eventId: row.event.id, attempt: row.attempts }, 'outbox consumer failed; will retry');
              }
            }),
        );
        if (errors.length) failed.push({ row, consumersDone: [...done], error: errors.join('; ') });
        else completed.push(row.seq);
      }
    });

    await this.store.markCompleted(completed);
    this.counters.completed += completed.length;
    for (const f of failed) {
      this.counters.failures++;
      await this.store.markFailed(f.row.seq, { consumersDone: f.consumersDone, error: f.error, retryInMs: this.retryDelay(f.row.attempts) });
    }
    return rows.length;
  }

  private retryDelay(attempts: number): number {
    return Math.min(this.opts.retryMaxMs, this.opts.retryBaseMs * 2 ** Math.max(0, attempts - 1));
  }

  private async pruneNowAndThen() {
    const now = Date.now();
    if (now - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = now;
    await this.store.prune(this.opts.retentionMs);
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
