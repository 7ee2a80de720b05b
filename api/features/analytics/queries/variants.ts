import type { Analytics } from '../../../../analytics/client';
import { ATTRIBUTED_VALUE, JOIN_LAST_VALUES, lastValuesCte, scopeCondition, scopeParams, type OutcomeScope } from './attribution';
import { count, numberOrNull, ratio, selectRows, variantLabel } from './clickhouse';
import { minutesInWindow, type TimeWindow } from './range';

/**
 * Outcome events that are never conversions (the reserved names of
 * docs/api-reference.md#outcome-events).
 */
export const RESERVED_OUTCOMES = ['error', 'latency'] as const;

export interface VariantStats {
  variant: string;
  evaluations: number;
  conversions: number;
  conversionRate: number;
  avgEventValue: number | null;
  latencyP50: number | null;
  latencyP99: number | null;
  conversionInterval: ConversionInterval | null;
}

/** A 95% interval of a conversion rate. */
export interface ConversionInterval {
  low: number;
  high: number;
}

const Z_95 = 1.959963984540054;

/**
 * The Wilson score interval (95%) of conversions / evaluations, each conversion one success of an
 * evaluation; null without evaluations or with more conversions than evaluations, where the rate
 * is no proportion (docs/analytics.md#conversions-and-attribution).
 */
export function conversionInterval(conversions: number, evaluations: number): ConversionInterval | null {
  if (evaluations <= 0 || conversions > evaluations) return null;
  const p = conversions / evaluations;
  const z2n = (Z_95 * Z_95) / evaluations;
  const centre = (p + z2n / 2) / (1 + z2n);
  const half = (Z_95 * Math.sqrt((p * (1 - p)) / evaluations + z2n / (4 * evaluations))) / (1 + z2n);
  return { low: Math.max(0, centre - half), high: Math.min(1, centre + half) };
}

export interface VariantsReport {
  variants: VariantStats[];
  totalEvaluations: number;
  totalConversions: number;
  overallConversionRate: number;
}

/**
 * Per value of the flag: evaluations and server latency p50/p99 (t-digest) from
 * evaluation_minutes; conversions = outcome events named `eventName` (default: every event but
 * `error` and `latency`) attributed to the value (attribution.ts); conversionRate = conversions /
 * evaluations (0 without evaluations); avgEventValue = mean `value` of the attributed events that
 * carry one (null when none). Events that cannot be attributed are not counted.
 */
export async function flagVariants(analytics: Analytics, scope: OutcomeScope, w: TimeWindow, eventName?: string): Promise<VariantsReport> {
  const params = { ...scopeParams(scope, w), eventName: eventName ?? '', reserved: [...RESERVED_OUTCOMES] };
  const service = scope.serviceId === undefined ? '' : 'AND service_id = {serviceId:String}';
  const conversion = eventName === undefined ? 'o.event NOT IN {reserved:Array(String)}' : 'o.event = {eventName:String}';
  const [evaluated, converted] = await Promise.all([
    selectRows<{ value: string; evaluations: string; q: [number, number, number] }>(
      analytics,
      `SELECT value, sum(evaluations) AS evaluations, quantilesExactWeightedMerge(0.5, 0.95, 0.99)(latency_histogram) AS q
       FROM evaluation_minutes
       WHERE project_id = {projectId:String} AND environment = {environment:String} ${service}
         AND flag_key = {flagKey:String} AND ${minutesInWindow('minute')}
       GROUP BY value`,
      params,
    ),
    selectRows<{ variant_value: string; conversions: string; avg_value: number | null }>(
      analytics,
      `WITH ${lastValuesCte(scope)}
       SELECT ${ATTRIBUTED_VALUE} AS variant_value, count() AS conversions, avgOrNull(o.value) AS avg_value
       FROM outcome_events AS o ${JOIN_LAST_VALUES}
       WHERE ${scopeCondition(scope, 'o')} AND ${conversion}
       GROUP BY variant_value HAVING variant_value != ''`,
      params,
    ),
  ]);
  const byVariant = new Map<string, VariantStats>();
  const entry = (value: string) => {
    const variant = variantLabel(value);
    const found = byVariant.get(variant) ?? { variant, evaluations: 0, conversions: 0, conversionRate: 0, avgEventValue: null, latencyP50: null, latencyP99: null, conversionInterval: null };
    byVariant.set(variant, found);
    return found;
  };
  for (const row of evaluated) {
    const stats = entry(row.value);
    stats.evaluations = count(row.evaluations);
    stats.latencyP50 = numberOrNull(row.q[0]);
    stats.latencyP99 = numberOrNull(row.q[2]);
  }
  for (const row of converted) {
    const stats = entry(row.variant_value);
    stats.conversions = count(row.conversions);
    stats.avgEventValue = numberOrNull(row.avg_value);
  }
  const variants = [...byVariant.values()]
    .map((v) => ({ ...v, conversionRate: ratio(v.conversions, v.evaluations), conversionInterval: conversionInterval(v.conversions, v.evaluations) }))
    .sort((a, b) => b.evaluations - a.evaluations || a.variant.localeCompare(b.variant));
  const totalEvaluations = variants.reduce((n, v) => n + v.evaluations, 0);
  const totalConversions = variants.reduce((n, v) => n + v.conversions, 0);
  return { variants, totalEvaluations, totalConversions, overallConversionRate: ratio(totalConversions, totalEvaluations) };
}
