import { randomUUID } from 'node:crypto';
import { z, type ZodTypeAny } from 'zod';
import type { AnalyticsRows, AnalyticsSink, AnalyticsTable } from '../../../analytics/rows';
import { HttpError } from '../../http/errors';
import type { RateLimiter } from '../../http/rate-limit';
import type { RequestContext } from '../../http/route';
import { ipBucket } from '../../http/client-ip';

/**
 * Event names (docs/api-reference.md#outcome-events) and admin event names: 1-64 of
 * [A-Za-z0-9_.:-].
 */
export const EventName = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be 1-64 of A-Z a-z 0-9 _ . : -');

/**
 * Events are accepted from 2 hours old to 60 seconds ahead of the server's clock
 * (docs/api-reference.md#outcome-events, docs/analytics-ingestion.md).
 */
export const MAX_AGE_MS = 2 * 3600_000;
export const MAX_AHEAD_MS = 60_000;

/** ISO 8601 text or epoch milliseconds. */
export const EventTime = z.union([
  z.number().finite().nonnegative(),
  z
    .string()
    .max(64)
    .regex(/^\d{4}-\d{2}-\d{2}T/, 'must be an ISO 8601 date-time or epoch milliseconds')
    .refine((s) => Number.isFinite(Date.parse(s)), 'must be an ISO 8601 date-time or epoch milliseconds'),
]);

/** Epoch ms of a validated EventTime, or the reason it falls outside the accepted window. */
export function inWindow(time: z.infer<typeof EventTime> | undefined, now: number): number | string {
  if (time === undefined) return now;
  const ms = Math.floor(typeof time === 'number' ? time : Date.parse(time));
  if (ms < now - MAX_AGE_MS) return 'timestamp: more than 2 hours old';
  if (ms > now + MAX_AHEAD_MS) return 'timestamp: more than 60 seconds in the future';
  return ms;
}

export const MAX_FLAGS_PER_EVENT = 100;
const MAX_FLAG_VALUE_JSON = 1024;

/** flagKey -> the value the client saw (any JSON), kept as JSON text as the tables do. */
export const FlagValues = z
  .record(z.string().min(1).max(256), z.unknown())
  .refine((flags) => Object.keys(flags).length <= MAX_FLAGS_PER_EVENT, `at most ${MAX_FLAGS_PER_EVENT} flags`)
  .transform((flags, ctx) => {
    const out: Record<string, string> = {};
    for (const [key, value] of Object.entries(flags)) {
      const json = value === undefined ? undefined : JSON.stringify(value);
      if (json === undefined || json.length > MAX_FLAG_VALUE_JSON) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, path: [key], message: `must be a JSON value of at most ${MAX_FLAG_VALUE_JSON} characters` });
        return z.NEVER;
      }
      out[key] = json;
    }
    return out;
  });

/** A JSON object kept as its JSON text (browser `data`, admin `properties`), at most `maxChars`. */
export const jsonObjectText = (maxChars: number) =>
  z
    .record(z.unknown())
    .transform((value) => JSON.stringify(value))
    .refine((json) => json.length <= maxChars, `must be at most ${maxChars} characters as JSON`);

export interface ItemProblem {
  index: number;
  message: string;
}

/** The parsed item, or why it was rejected (its first problems, joined). */
export function parseItem<S extends ZodTypeAny>(schema: S, item: unknown): { ok: true; value: z.infer<S> } | { ok: false; message: string } {
  const parsed = schema.safeParse(item);
  if (parsed.success) return { ok: true, value: parsed.data };
  const message = parsed.error.issues
    .slice(0, 3)
    .map((issue) => (issue.path.length ? `${issue.path.join('.')}: ${issue.message}` : issue.message))
    .join('; ');
  return { ok: false, message };
}

export const newEventId = () => randomUUID();

export interface PendingRow<T extends AnalyticsTable = AnalyticsTable> {
  table: T;
  row: AnalyticsRows[T];
}

export const pending = <T extends AnalyticsTable>(table: T, row: AnalyticsRows[T]): PendingRow => ({ table, row }) as PendingRow;

/**
 * Hands the rows to the writer in order. When its memory bound refuses one, the request is
 * answered 503 with Retry-After, never 202 for a row that is lost: `kept` says how many rows of
 * this request the writer did take (the first ones), so a client may resend only the rest.
 */
export function recordAll(sink: AnalyticsSink, rows: readonly PendingRow[]): void {
  for (let i = 0; i < rows.length; i++) {
    const { table, row } = rows[i];
    if (!sink.record(table, row)) {
      throw new HttpError(503, 'Analytics ingestion is over its memory bound; retry shortly', { retryAfter: 5, kept: i });
    }
  }
}

/**
 * Browser and admin ingestion: 100 requests per minute per client IP (IPv6 by /64;
 * docs/limits.md#rate-limits).
 */
export const INGEST_REQUESTS_PER_MINUTE = 100;

/**
 * Browsers post ingestion events from any origin, without cookies: every origin may, and a
 * preflight is answered for the JSON body and the write token.
 */
export const PREFLIGHT_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type, X-Write-Token',
  'Access-Control-Max-Age': '86400',
} as const;

/**
 * A public ingestion route's `beforeBody`: CORS headers on every answer (errors too, so a page's
 * script can read them), then one request of the route's per-IP budget (429 past it).
 */
export function publicIngestGate(limiter: RateLimiter, bucket: string) {
  return async (ctx: RequestContext<unknown, unknown, unknown>) => {
    ctx.res.setHeader('Access-Control-Allow-Origin', '*');
    ctx.res.setHeader('Access-Control-Expose-Headers', 'RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After');
    await limiter.enforce(ctx.res, `${bucket}:${ipBucket(ctx.ip)}`, INGEST_REQUESTS_PER_MINUTE, 'IP address');
  };
}
