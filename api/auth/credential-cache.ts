import type { Cache } from '../infra/cache';
import type { Logger } from '../infra/logger';

/**
 * A short-lived, per-process memo of resolved bearer credentials, keyed by the SHA-256 of the
 * secret, so hot paths (evaluation) do not query Postgres on every request. Revocation evicts
 * the entry here at once and on every other replica through the shared cache's pub/sub; the
 * TTL bounds staleness should a message be lost (docs/limits.md: about 10 s with a shared cache).
 * While Postgres is unreachable the last verified answer keeps serving for STALE_IF_UNAVAILABLE_MS
 * past its TTL (`stale`), so evaluation goes on through an outage
 * (docs/operations.md#faults-and-recovery); a revocation still evicts it at once.
 */
export const STALE_IF_UNAVAILABLE_MS = 5 * 60_000;
const STALE_RETRY_MS = 1_000;

export class CredentialCache<V> {
  private readonly entries = new Map<string, { value: V; until: number; verifiedAt: number }>();
  private unsubscribe?: () => Promise<void>;

  constructor(
    private readonly opts: { cache: Cache; channel: string; ttlMs: number; maxEntries: number; logger: Logger },
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.opts.cache.subscribe(this.opts.channel, (key) => {
      this.entries.delete(key);
    });
  }

  async stop(): Promise<void> {
    await this.unsubscribe?.();
    this.entries.clear();
  }

  get(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    if (hit.until <= Date.now()) {
      if (this.staleUntil(hit) <= Date.now()) this.entries.delete(key);
      return undefined;
    }
    return hit.value;
  }

  /**
   * The last verified answer, past its TTL but within STALE_IF_UNAVAILABLE_MS of its
   * verification: only for when the source cannot be asked. It then serves for another
   * STALE_RETRY_MS before the source is asked again, so an outage costs one failed lookup per
   * credential and interval rather than one per request.
   */
  stale(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (!hit || this.staleUntil(hit) <= Date.now()) return undefined;
    hit.until = Math.min(Date.now() + STALE_RETRY_MS, this.staleUntil(hit));
    return hit.value;
  }

  private staleUntil(hit: { verifiedAt: number }): number {
    return hit.verifiedAt + this.opts.ttlMs + STALE_IF_UNAVAILABLE_MS;
  }

  set(key: string, value: V): void {
    if (this.entries.size >= this.opts.maxEntries) {
      // Maps iterate in insertion order: drop the oldest entry.
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    const now = Date.now();
    this.entries.set(key, { value, until: now + this.opts.ttlMs, verifiedAt: now });
  }

  /** Forgets `key` here immediately and tells every replica to forget it too. */
  async evict(key: string): Promise<void> {
    this.entries.delete(key);
    await this.opts.cache.publish(this.opts.channel, key).catch((error) => {
      // Other replicas still drop it when the TTL runs out.
      this.opts.logger.error({ err: error }, 'could not publish a credential eviction');
    });
  }
}
