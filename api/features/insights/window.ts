import { RANGE_MS, type RangeName } from '../analytics/queries/range';

/**
 * Time windows of the flag insights, over the ranges every analytics query shares
 * (api/features/analytics/queries/range.ts, with `rangeParam`). A window is whole minutes,
 * [start, end), ending at the end of the current minute: exactly what the per-minute rollup
 * (evaluation_minutes) can answer, so an event at `start` counts and one a millisecond before it
 * does not. The current minute is still filling, which is why `end` may lie up to a minute ahead
 * of now.
 */
export const MINUTE_MS = 60_000;

/** The ranges flag insights offer, and the metrics time-series bucket of each (in minutes, dividing the length). */
const SERIES_BUCKET_MINUTES = { '15m': 1, '1h': 1, '24h': 15, '7d': 60, '30d': 360 } as const satisfies Partial<Record<RangeName, number>>;
export type RangeLabel = keyof typeof SERIES_BUCKET_MINUTES;

/** Heatmap columns per range (the metrics series uses SERIES_BUCKET_MINUTES). */
export const HEATMAP_BUCKET_MINUTES: Record<'15m' | '1h' | '24h' | '7d', number> = { '15m': 1, '1h': 5, '24h': 60, '7d': 360 };

export interface MinuteWindow {
  /** Epoch ms, minute-aligned; inclusive. */
  startMs: number;
  /** Epoch ms, minute-aligned; exclusive. */
  endMs: number;
}

export interface RangeWindow extends MinuteWindow {
  label: RangeLabel;
  minutes: number;
  bucketMinutes: number;
}

export const floorMinute = (ms: number) => Math.floor(ms / MINUTE_MS) * MINUTE_MS;

export function rangeWindow(label: RangeLabel, nowMs: number, bucketMinutes: number = SERIES_BUCKET_MINUTES[label]): RangeWindow {
  const minutes = RANGE_MS[label] / MINUTE_MS;
  const endMs = floorMinute(nowMs) + MINUTE_MS;
  return { label, minutes, bucketMinutes, startMs: endMs - minutes * MINUTE_MS, endMs };
}

/** The `range` object of a response. */
export const rangeBody = (w: RangeWindow) => ({
  start: new Date(w.startMs).toISOString(),
  end: new Date(w.endMs).toISOString(),
  rangeLabel: w.label,
  minutes: w.minutes,
});

/** Any span of time [start, end), to the millisecond. */
export interface TimeSpan {
  /** Epoch ms; inclusive. */
  startMs: number;
  /** Epoch ms; exclusive. */
  endMs: number;
}

/**
 * The windows compared around a change at `atMs`, to the millisecond: `before` is the `minutes`
 * before it, [at - minutes, at), `after` the same length from it, [at, at + minutes). The change's
 * own minute is split between them (docs/insights.md#get-apiflagskeytoggle-impact).
 */
export function aroundChange(atMs: number, minutes: number): { before: TimeSpan; after: TimeSpan } {
  const length = minutes * MINUTE_MS;
  return { before: { startMs: atMs - length, endMs: atMs }, after: { startMs: atMs, endMs: atMs + length } };
}
