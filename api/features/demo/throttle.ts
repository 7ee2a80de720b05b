import { ipBucket } from '../../http/client-ip';
import type { Cache } from '../../infra/cache';

/** One demo write per IP per 2 seconds (docs/limits.md). */
export const DEMO_WRITE_INTERVAL_SECONDS = 2;

/**
 * The demo write throttle (docs/api-reference.md#demo-service). A claim is a SET NX with a 2 s
 * expiry in the shared cache, so it holds across every replica (Redis) and needs one round trip.
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
