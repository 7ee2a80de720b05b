import type { Response } from 'express';
import type { Principal } from '../auth/principal';
import type { Cache } from '../infra/cache';
import { boundedMemo } from '../infra/ids';
import { ipBucket } from './client-ip';
import { tooManyRequests } from './errors';

/** Bucket names kept per kind (addresses, tokens, services): a busy edge's clients, not every one ever seen. */
const BUCKET_NAMES_KEPT = 10_000;

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
    enforceDecision(res, await this.consume(bucket, limit), rateLimitMessage(limit, this.windowSeconds, what));
  }
}

/**
 * The budgets every edge spends before a route's own, with the same counters on all of them:
 * per client IP (RATE_LIMIT_PER_IP) before authentication, per API token (RATE_LIMIT_PER_TOKEN)
 * after it, and per service (RATE_LIMIT_PER_SERVICE) for its readers. `what` names the budget in
 * the 429 message. Bucket names are kept per address, token and service: the same string on every
 * request, whose hash V8 keeps, instead of a new one to hash.
 */
const ipBucketName = boundedMemo((ip: string) => `ip:${ipBucket(ip)}`, BUCKET_NAMES_KEPT);
const tokenBucketName = boundedMemo((tokenId: string) => `token:${tokenId}`, BUCKET_NAMES_KEPT);
const serviceBucketName = boundedMemo((serviceId: string) => `service:${serviceId}`, BUCKET_NAMES_KEPT);
export const PER_IP = { bucket: ipBucketName, what: 'IP address' } as const;
export const PER_TOKEN = {
  /** The token's counter; undefined for callers without a token (anonymous, cookie sessions). */
  bucket: (p: Principal): string | undefined => (p.type === 'project_api_token' || p.type === 'personal_access_token' ? tokenBucketName(p.tokenId) : undefined),
  what: 'API token',
} as const;
export const PER_SERVICE = { bucket: serviceBucketName, what: 'service' } as const;

export const rateLimitMessage = (limit: number, windowSeconds: number, what: string) =>
  `Rate limit exceeded: ${limit} requests per ${windowSeconds} seconds per ${what}`;

/**
 * The budget a request's RateLimit-* headers report among those it spent: the one with the
 * smallest share left, and a refusal over any budget that still allowed.
 */
export function tighter(current: RateDecision | undefined, d: RateDecision): RateDecision {
  if (current === undefined || (!d.allowed && current.allowed)) return d;
  return d.remaining / d.limit < current.remaining / current.limit ? d : current;
}

/**
 * RateLimit-Limit, -Remaining and -Reset of a budget, and Retry-After (seconds until its window
 * resets) when it refused: the one place these headers are made, for Express responses
 * (enforceDecision) and the lean path's node:http ones.
 */
export function rateHeaders(d: RateDecision): Record<string, string | number> {
  const headers: Record<string, string | number> = { 'RateLimit-Limit': d.limit, 'RateLimit-Remaining': d.remaining, 'RateLimit-Reset': d.reset };
  if (!d.allowed) headers['Retry-After'] = Math.max(1, d.reset - Math.floor(Date.now() / 1000));
  return headers;
}

/** On an Express response: keeps the tightest budget of the request and its headers, and throws 429 when `d` refused. */
export function enforceDecision(res: Response, d: RateDecision, message: string): void {
  const current = res.locals.rateLimit as RateDecision | undefined;
  const next = tighter(current, d);
  if (next !== current) {
    res.locals.rateLimit = next;
    if (!res.headersSent) {
      const headers = rateHeaders(next);
      for (const name in headers) res.setHeader(name, String(headers[name]));
    }
  }
  if (!d.allowed) throw tooManyRequests(message);
}
