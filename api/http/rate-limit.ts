import type { Response } from 'express';
import type { Cache } from '../infra/cache';
import { tooManyRequests } from './errors';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds when the window resets. */
  reset: number;
}

/**
 * Fixed-window counters kept in the shared cache (an atomic Lua INCR in Redis), so every
 * replica counts against the same budget.
 */
export class RateLimiter {
  constructor(
    private readonly cache: Cache,
    readonly windowSeconds: number,
  ) {}

  async consume(bucket: string, limit: number): Promise<RateDecision> {
    const { count, resetMs } = await this.cache.hit(`rl:${bucket}`, this.windowSeconds);
    return { allowed: count <= limit, limit, remaining: Math.max(0, limit - count), reset: Math.ceil(resetMs / 1000) };
  }

  /** Consumes one unit, writes the headers (keeping the tightest budget seen) and throws 429 past it. */
  async enforce(res: Response, bucket: string, limit: number, what: string): Promise<void> {
    const decision = await this.consume(bucket, limit);
    applyRateHeaders(res, decision);
    if (!decision.allowed) {
      res.setHeader('Retry-After', String(Math.max(1, decision.reset - Math.floor(Date.now() / 1000))));
      throw tooManyRequests(`Rate limit exceeded: ${limit} requests per ${this.windowSeconds} seconds per ${what}`);
    }
  }
}

export function applyRateHeaders(res: Response, d: RateDecision): void {
  const current = res.locals.rateLimit as RateDecision | undefined;
  if (current && current.remaining / current.limit <= d.remaining / d.limit) return;
  res.locals.rateLimit = d;
  if (res.headersSent) return;
  res.setHeader('RateLimit-Limit', String(d.limit));
  res.setHeader('RateLimit-Remaining', String(d.remaining));
  res.setHeader('RateLimit-Reset', String(d.reset));
}
