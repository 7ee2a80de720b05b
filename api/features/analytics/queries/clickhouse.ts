import type { Analytics } from '../../../../analytics/client';

/** Runs one SELECT with bound parameters only ({name:Type} in the text, values in `params`). */
export async function selectRows<T>(analytics: Analytics, query: string, params: Record<string, unknown>): Promise<T[]> {
  const rs = await analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
  return (await rs.json()) as T[];
}

/** ClickHouse sends 64-bit integers as strings and NaN for empty averages: a finite number or null. */
export function numberOrNull(value: unknown): number | null {
  if (value === null || value === undefined || value === '') return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

export const count = (value: unknown): number => numberOrNull(value) ?? 0;

/** part / whole, 0 when there is no whole (a rate of nothing). */
export const ratio = (part: number, whole: number): number => (whole > 0 ? part / whole : 0);

/** Share of a funnel step's users who did not reach the next one (0 when the step had none). */
export const dropOffRate = (previous: number, current: number): number => (previous > 0 ? 1 - current / previous : 0);

/**
 * How a flag value stored as JSON text (evaluation `value`, outcome and browser `flags`) is shown
 * as a variant: a string value as itself, anything else as its JSON text (`true`, `3`, `{"a":1}`).
 */
export function variantLabel(json: string): string {
  try {
    const parsed: unknown = JSON.parse(json);
    return typeof parsed === 'string' ? parsed : json;
  } catch {
    return json;
  }
}

/** A map of flag key -> JSON text as the client sent it: values parsed back where they parse. */
export function parseFlagValues(flags: Record<string, string>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(flags).map(([key, json]) => [key, parseJsonOr(json, json)]));
}

export function parseJsonOr<T>(json: string, fallback: T): unknown {
  try {
    return JSON.parse(json);
  } catch {
    return fallback;
  }
}
