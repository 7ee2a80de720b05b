/** How release-safety numbers, times and states read in the console. */
import type { CanaryGate, CanaryStatus } from './types';

export const percent = (n: number) => `${Number.isInteger(n) ? n : n.toFixed(1)}%`;

/** An error rate (0-1) as a percentage with two decimals. */
export const rate = (n: number | null | undefined) => (n === null || n === undefined ? '—' : `${(n * 100).toFixed(2)}%`);

export const ms = (n: number | null | undefined) => (n === null || n === undefined ? '—' : `${n.toFixed(n < 10 ? 1 : 0)} ms`);

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

export const time = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleTimeString() : '—');

/** Seconds as "1 min 05 s" (a countdown's text keeps its width: tabular digits in the stylesheet). */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`;
}

export const STATUS_LABEL: Record<CanaryStatus, string> = {
  running: 'Running',
  paused: 'Paused',
  completed: 'Completed',
  rolled_back: 'Rolled back',
  aborted: 'Aborted',
};

/** The interval of a delta: estimate with its [lower, upper] bounds (latency bounds may be null). */
export function interval(i: CanaryGate['latencyDeltaMs'], unit: (n: number | null) => string): string {
  if (i.estimate === null) return 'no estimate yet';
  return `${unit(i.estimate)} [${unit(i.lower)}, ${unit(i.upper)}]`;
}

/** A signed delta of a rate, in percentage points. */
export const ratePoints = (n: number | null) => (n === null ? '—' : `${n >= 0 ? '+' : ''}${(n * 100).toFixed(2)} pp`);

export const msDelta = (n: number | null) => (n === null ? '—' : `${n >= 0 ? '+' : ''}${n.toFixed(1)} ms`);
