import type { AnalyticsSink } from '../../../analytics/rows';
import type { ContextEntry } from '../evaluation/contexts';
import type { ContextAttributeFilter } from './attributes';

export interface RecentContextRecorderOptions {
  sink: AnalyticsSink;
  filter: ContextAttributeFilter;
  /** A key's row is written at most once per this many milliseconds (per instance). */
  intervalMs: number;
  /** Keys remembered per generation; a full generation starts the next one early (a key may then be written again sooner). */
  maxTracked: number;
  /** Contexts waiting for the next turn; past it new ones are skipped until it drains. */
  maxPending: number;
}

/**
 * Feeds the recent-contexts warehouse (analytics/schema/032) from the context ring: every
 * context the ring takes is offered here. The request path pays a few map lookups and, for a key
 * not written lately, a push; filtering and serializing the attributes happen on the next
 * event-loop turn, and rows go through the one batched analytics writer.
 *
 * Keys written lately are remembered in two generations of `intervalMs` each: a key in either
 * is skipped, so a busy key writes one row every one to two intervals, not one per request.
 * Rotating generations forgets old keys at once (no per-key expiry to scan), and memory is
 * bounded by two generations of `maxTracked` keys plus `maxPending` contexts.
 */
export class RecentContextRecorder {
  private current = new KeyGeneration();
  private previous = new KeyGeneration();
  private rotatedAt = Number.NEGATIVE_INFINITY;
  private pending: ContextEntry[] = [];
  private drainScheduled = false;

  constructor(private readonly opts: RecentContextRecorderOptions) {}

  /** Never blocks and never throws (the ring calls it on the evaluation path). */
  readonly offer = (entry: ContextEntry): void => {
    if (entry.at - this.rotatedAt >= this.opts.intervalMs || this.current.size >= this.opts.maxTracked) {
      this.previous = this.current;
      this.current = new KeyGeneration();
      this.rotatedAt = entry.at;
    }
    const { serviceId, environment, targetingKey } = entry;
    if (this.current.has(serviceId, environment, targetingKey) || this.previous.has(serviceId, environment, targetingKey)) return;
    // More new keys in one turn than it may hold: skip the rest rather than hold their contexts.
    if (this.pending.length >= this.opts.maxPending) return;
    this.current.add(serviceId, environment, targetingKey);
    this.pending.push(entry);
    if (!this.drainScheduled) {
      this.drainScheduled = true;
      setImmediate(this.drain);
    }
  };

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

/**
 * Targeting keys per service and environment. Nested rather than one joined string key: the
 * service and environment strings are the snapshot's own (their hashes cached), and joining
 * them with the key cost more than the lookups on every request.
 */
class KeyGeneration {
  private readonly services = new Map<string, Map<string, Set<string>>>();
  size = 0;

  has(serviceId: string, environment: string, targetingKey: string): boolean {
    return this.services.get(serviceId)?.get(environment)?.has(targetingKey) === true;
  }

  add(serviceId: string, environment: string, targetingKey: string): void {
    let environments = this.services.get(serviceId);
    if (environments === undefined) this.services.set(serviceId, (environments = new Map()));
    let keys = environments.get(environment);
    if (keys === undefined) environments.set(environment, (keys = new Set()));
    keys.add(targetingKey);
    this.size++;
  }
}
