import { z } from 'zod';

/**
 * Time windows of the flag insights. A window is whole minutes, [start, end), ending at the end
 * of the current minute: exactly what the per-minute rollup (evaluation_minutes) can answer, so
 * an event at `start` counts and one a millisecond before it does not. The current minute is
 * still filling, which is why `end` may lie up to a minute ahead of now.
 *
 * Another helper keeps the analytics routes' ranges in api/features/analytics/queries/range.ts
 * (not committed when this was written); these two should become one module.
 */
export const MINUTE_MS = 60_000;

/** Range label -> length in minutes and the time-series bucket (in minutes, divides the length). */
const RANGES = {
  '15m': { minutes: 15, bucketMinutes: 1 },
  '1h': { minutes: 60, bucketMinutes: 1 },
  '24h': { minutes: 1_440, bucketMinutes: 15 },
  '7d': { minutes: 10_080, bucketMinutes: 60 },
  '30d': { minutes: 43_200, bucketMinutes: 360 },
} as const;
export type RangeLabel = keyof typeof RANGES;

/** Heatmap columns per range (the metrics series uses RANGES' bucketMinutes). */
export const HEATMAP_BUCKET_MINUTES: Record<'15m' | '1h' | '24h' | '7d', number> = { '15m': 1, '1h': 5, '24h': 60, '7d': 360 };

/** A `range` query parameter limited to `allowed` (anything else is a 400), `fallback` when absent. */
export function rangeParam<const R extends readonly [RangeLabel, ...RangeLabel[]]>(allowed: R, fallback: R[number]) {
  return z.enum(allowed).default(fallback as never).describe(`One of ${allowed.join(', ')}; default ${fallback}`);
}

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

export function rangeWindow(label: RangeLabel, nowMs: number, bucketMinutes: number = RANGES[label].bucketMinutes): RangeWindow {
  const { minutes } = RANGES[label];
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

/**
 * The windows compared around a change at `atMs`: `minutes` whole minutes before the change's
 * minute and as many after it. The change's own minute is in neither: the rollup cannot split
 * it, and it holds both the old and the new state.
 */
export function aroundChange(atMs: number, minutes: number): { before: MinuteWindow; after: MinuteWindow } {
  const changeMinute = floorMinute(atMs);
  return {
    before: { startMs: changeMinute - minutes * MINUTE_MS, endMs: changeMinute },
    after: { startMs: changeMinute + MINUTE_MS, endMs: changeMinute + (minutes + 1) * MINUTE_MS },
  };
}
