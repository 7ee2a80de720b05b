import { ipBucket } from '../../http/client-ip';
import type { Cache } from '../../infra/cache';

/** Spec 8: one demo write per IP per 2 seconds. */
export const DEMO_WRITE_INTERVAL_SECONDS = 2;

/**
 * The demo write throttle (spec 4.2 rule 6). A claim is a SET NX with a 2 s expiry in the
 * shared cache, so it holds across every replica (Redis) and needs one round trip.
 */
export class DemoWriteThrottle {
  constructor(
    private readonly cache: Cache,
    readonly intervalSeconds = DEMO_WRITE_INTERVAL_SECONDS,
  ) {}

  /** True when this IP (an IPv6 address: its /64) may write now (and the next write must wait `intervalSeconds`). */
  tryAcquire(ip: string): Promise<boolean> {
    return this.cache.setIfAbsent(`demo:write:${ipBucket(ip)}`, '1', this.intervalSeconds);
  }
}
