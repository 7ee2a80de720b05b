import type { AnalyticsSink } from '../../../analytics/rows';
import type { ContextEntry } from '../evaluation/contexts';
import type { ContextAttributeFilter } from './attributes';

export interface RecentContextRecorderOptions {
  sink: AnalyticsSink;
  filter: ContextAttributeFilter;
  /** A key's row is written at most once per this many milliseconds (per instance). */
  intervalMs: number;
  /** Keys remembered for that; past it the longest-remembered one is forgotten (and may be written again sooner). */
  maxTracked: number;
  /** Contexts waiting for the next turn; past it new ones are skipped until it drains. */
  maxPending: number;
}

/**
 * Feeds the recent-contexts warehouse (analytics/schema/032) from the context ring: every
 * context the ring takes is offered here. The request path pays a map lookup and, for a key
 * not written within `intervalMs`, a push; filtering and serializing the attributes happen on
 * the next event-loop turn, and rows go through the one batched analytics writer. A busy key
 * thus writes one row a minute, not one per request, and memory is bounded by `maxTracked`
 * keys and `maxPending` contexts.
 */
export class RecentContextRecorder {
  /** `service \n environment \n key` -> when its row was last taken; a Map keeps insertion order, so the oldest come first. */
  private readonly lastTaken = new Map<string, number>();
  private pending: ContextEntry[] = [];
  private drainScheduled = false;

  constructor(private readonly opts: RecentContextRecorderOptions) {}

  /** Never blocks and never throws (the ring calls it on the evaluation path). */
  readonly offer = (entry: ContextEntry): void => {
    const key = `${entry.serviceId}\n${entry.environment}\n${entry.targetingKey}`;
    const last = this.lastTaken.get(key);
    if (last !== undefined && entry.at - last < this.opts.intervalMs) return;
    // More new keys in one turn than it may hold: skip the rest rather than hold their contexts.
    if (this.pending.length >= this.opts.maxPending) return;
    if (last !== undefined) this.lastTaken.delete(key);
    this.lastTaken.set(key, entry.at);
    this.forgetOldest(entry.at);
    this.pending.push(entry);
    if (!this.drainScheduled) {
      this.drainScheduled = true;
      setImmediate(this.drain);
    }
  };

  /** Drops keys whose interval has passed (they are written again anyway) and any past the bound. */
  private forgetOldest(now: number): void {
    for (const [key, at] of this.lastTaken) {
      if (this.lastTaken.size <= this.opts.maxTracked && now - at < this.opts.intervalMs) return;
      this.lastTaken.delete(key);
    }
  }

  private readonly drain = (): void => {
    this.drainScheduled = false;
    const entries = this.pending;
    this.pending = [];
    for (const entry of entries) {
      // A row the writer refuses (its memory bound) is counted there as dropped.
      this.opts.sink.record('recent_contexts', {
        seenAt: entry.at,
        serviceId: entry.serviceId,
        environment: entry.environment,
        targetingKey: entry.targetingKey,
        attributes: this.opts.filter.toJson(entry.context),
      });
    }
  };
}
