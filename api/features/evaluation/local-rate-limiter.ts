import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { RateDecision } from '../../http/rate-limit';

interface Bucket {
  /** The shared counter's value the last time we synced (includes our own flushed hits). */
  shared: number;
  /** Hits taken here and not yet added to the shared counter. */
  pending: number;
  /** Hits being added right now (a sync in flight). */
  inFlight: number;
  /** When the shared window ends (ms); provisional until the first sync answers. */
  windowEnd: number;
}

/**
 * Rate limits for the evaluation hot path without a cache round trip per request.
 *
 * Each bucket counts locally and adds its pending hits to the same shared fixed-window counter
 * the foundation RateLimiter uses (`rl:<bucket>` through Cache.hit) every `syncIntervalMs`.
 * A decision is `shared + pending + 1 <= limit`: exact on one replica, and across N replicas
 * the budget can be overrun by at most what the other replicas admitted since their last sync
 * (N x rate x interval), which for 1,000/min per IP and a 250 ms interval is a handful of
 * requests. The counters (and RateLimit-* headers) agree with the Express-side limiter because
 * both feed one shared counter.
 */
export class LocalRateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private timer?: NodeJS.Timeout;
  private syncing?: Promise<void>;

  constructor(
    private readonly opts: { cache: Cache; windowSeconds: number; syncIntervalMs: number; logger: Logger },
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sync(), this.opts.syncIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sync();
  }

  /** Takes one unit from `bucket`; never waits. */
  consume(bucket: string, limit: number, now = Date.now()): RateDecision {
    let b = this.buckets.get(bucket);
    if (b === undefined) {
      b = { shared: 0, pending: 0, inFlight: 0, windowEnd: now + this.opts.windowSeconds * 1000 };
      this.buckets.set(bucket, b);
    } else if (now >= b.windowEnd) {
      // A new window: hits of the old one (synced or not) no longer count anywhere.
      b.shared = 0;
      b.pending = 0;
      b.windowEnd = now + this.opts.windowSeconds * 1000;
    }
    b.pending++;
    const count = b.shared + b.inFlight + b.pending;
    return { allowed: count <= limit, limit, remaining: Math.max(0, limit - count), reset: Math.ceil(b.windowEnd / 1000) };
  }

  /** Adds pending hits to the shared counters (one Cache.hit per busy bucket) and drops idle buckets. */
  sync(): Promise<void> {
    if (this.syncing) return this.syncing;
    this.syncing = this.syncOnce().finally(() => {
      this.syncing = undefined;
    });
    return this.syncing;
  }

  private async syncOnce(): Promise<void> {
    const now = Date.now();
    const work: Promise<void>[] = [];
    for (const [name, b] of this.buckets) {
      if (b.pending === 0) {
        if (now >= b.windowEnd && b.inFlight === 0) this.buckets.delete(name);
        continue;
      }
      const amount = b.pending;
      b.pending = 0;
      b.inFlight += amount;
      work.push(
        this.opts.cache.hit(`rl:${name}`, this.opts.windowSeconds, amount).then(
          ({ count, resetMs }) => {
            b.inFlight -= amount;
            b.shared = count;
            b.windowEnd = resetMs;
          },
          (error) => {
            // Keep counting locally; the hits go out with the next sync.
            b.inFlight -= amount;
            b.pending += amount;
            this.opts.logger.warn({ err: error, bucket: name }, 'rate-limit sync failed');
          },
        ),
      );
    }
    await Promise.all(work);
  }

  get windowSeconds(): number {
    return this.opts.windowSeconds;
  }

  /** Buckets currently tracked (health and tests). */
  get size(): number {
    return this.buckets.size;
  }
}
