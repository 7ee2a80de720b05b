import { z } from 'zod';

/**
 * The time ranges of every analytics and flag-insight query (docs/insights.md, docs/analytics.md:
 * `range` or
 * `period`): one list of names and lengths, and `rangeParam` for their query parameters. Each
 * endpoint accepts its own subset; anything else is a 400. Analytics windows (`windowOf`) end
 * now and start at the start of the minute `range` ago, so the per-minute rollups and the raw
 * tables cover exactly the same events (a rollup row is a whole minute); the flag insights cut
 * whole-minute windows of the same lengths (api/features/insights/window.ts).
 */
export const RANGE_MS = {
  '15m': 15 * 60_000,
  '1h': 3_600_000,
  '6h': 6 * 3_600_000,
  '24h': 24 * 3_600_000,
  '7d': 7 * 86_400_000,
  '30d': 30 * 86_400_000,
  '90d': 90 * 86_400_000,
} as const;
export type RangeName = keyof typeof RANGE_MS;

/** Time-series bucket per range: about 12 to 168 points per chart. */
const BUCKET_SECONDS: Record<RangeName, number> = {
  '15m': 60,
  '1h': 300,
  '6h': 1_800,
  '24h': 3_600,
  '7d': 21_600,
  '30d': 86_400,
  '90d': 7 * 86_400,
};

/** A `range`/`period` query parameter limited to `allowed`, `fallback` when absent. */
export function rangeParam<const R extends readonly [RangeName, ...RangeName[]]>(allowed: R, fallback: R[number]) {
  return z.enum(allowed).default(fallback as never).describe(`One of ${allowed.join(', ')}; default ${fallback}`);
}

export interface TimeWindow {
  range: RangeName;
  fromMs: number;
  toMs: number;
  bucketSeconds: number;
}

export function windowOf(range: RangeName, nowMs = Date.now()): TimeWindow {
  const fromMs = Math.floor((nowMs - RANGE_MS[range]) / 60_000) * 60_000;
  return { range, fromMs, toMs: nowMs, bucketSeconds: BUCKET_SECONDS[range] };
}

/**
 * The window as bound ClickHouse parameters, and the conditions that use them: `raw(column)` for
 * a DateTime64 event column, `minutes(column)` for a rollup's DateTime minute.
 */
export function windowParams(w: TimeWindow) {
  return { fromMs: w.fromMs, toMs: w.toMs, bucketSeconds: w.bucketSeconds };
}
export const rawInWindow = (column: string) =>
  `${column} >= fromUnixTimestamp64Milli({fromMs:Int64}) AND ${column} <= fromUnixTimestamp64Milli({toMs:Int64})`;
export const minutesInWindow = (column: string) =>
  `${column} >= toDateTime(intDiv({fromMs:Int64}, 1000)) AND ${column} <= toDateTime(intDiv({toMs:Int64}, 1000))`;
/** The start of a column's time-series bucket as epoch seconds (timezone-free). */
export const bucketOf = (column: string) => `toUnixTimestamp(toStartOfInterval(toDateTime(${column}), toIntervalSecond({bucketSeconds:UInt32})))`;
