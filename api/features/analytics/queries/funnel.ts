import type { Analytics } from '../../../../analytics/client';
import { scopeCondition, scopeParams, type OutcomeScope } from './attribution';
import { count, dropOffRate, ratio, selectRows, variantLabel } from './clickhouse';
import type { TimeWindow } from './range';

export const MAX_FUNNEL_STEPS = 10;

export interface FunnelStep {
  step: string;
  stepIndex: number;
  totalUsers: number;
  byVariant: Record<string, number>;
  dropOffRate: number;
}

export interface FunnelReport {
  funnelSteps: FunnelStep[];
  variants: string[];
  overallConversionRate: number;
}

/**
 * An ordered funnel of outcome events per user (a targeting key within a service), split by the
 * flag's value. ClickHouse windowFunnel, default mode, window = the whole period: a user reaches
 * step n when steps 1..n happened in this order within the period; other events in between and
 * repeats of a step do not break the chain, a skipped step ends it at the step before.
 * A user's value: the flag's value in the `flags` of their earliest step event that names it,
 * otherwise the attribution of docs/api-reference.md#outcome-events (attribution.ts); users with no
 * value are not in the funnel (they never saw the flag). stepIndex is 0-based; dropOffRate is the
 * share of the previous step's users who did not reach this one (0 for the first);
 * overallConversionRate = users at the last step / users at the first.
 */
export async function flagFunnel(analytics: Analytics, scope: OutcomeScope, w: TimeWindow, steps: string[]): Promise<FunnelReport> {
  const stepParams = Object.fromEntries(steps.map((step, i) => [`step${i}`, step]));
  const params = { ...scopeParams(scope, w), ...stepParams, steps, windowMs: w.toMs - w.fromMs };
  // Only the indexes are written into the text; the names are bound parameters.
  const conditions = steps.map((_, i) => `o.event = {step${i}:String}`).join(', ');
  // Each user's funnel is reduced first, then joined to their last value: the join sees one row
  // per user (about a fifth of the step events over 30 days in bench:analytics), not every event.
  const rows = await selectRows<{ variant_value: string; level: number; users: string }>(
    analytics,
    `WITH last_values AS (
       SELECT service_id, targeting_key_hash, argMax(left(value, 128), timestamp) AS last_value
       FROM evaluation_events
       WHERE ${scopeCondition(scope)} AND flag_key = {flagKey:String} AND targeting_key_hash != ''
       GROUP BY service_id, targeting_key_hash
     ), funnels AS (
       SELECT o.service_id AS service_id, o.targeting_key_hash AS targeting_key_hash,
              windowFunnel({windowMs:UInt64})(toUInt64(toUnixTimestamp64Milli(o.timestamp)), ${conditions}) AS level,
              argMinIf(left(o.flags[{flagKey:String}], 128), o.timestamp, mapContains(o.flags, {flagKey:String})) AS seen
       FROM outcome_events AS o
       WHERE ${scopeCondition(scope, 'o')} AND o.targeting_key_hash != '' AND o.event IN {steps:Array(String)}
       GROUP BY service_id, targeting_key_hash
       HAVING level > 0
     )
     SELECT if(f.seen != '', f.seen, lv.last_value) AS variant_value, f.level AS level, count() AS users
     FROM funnels AS f ANY LEFT JOIN last_values AS lv ON lv.service_id = f.service_id AND lv.targeting_key_hash = f.targeting_key_hash
     WHERE variant_value != ''
     GROUP BY variant_value, level`,
    params,
  );
  const variants = [...new Set(rows.map((r) => variantLabel(r.variant_value)))].sort();
  const funnelSteps = steps.map((step, i): FunnelStep => {
    const byVariant: Record<string, number> = Object.fromEntries(variants.map((v) => [v, 0]));
    for (const row of rows) if (Number(row.level) >= i + 1) byVariant[variantLabel(row.variant_value)] += count(row.users);
    const totalUsers = Object.values(byVariant).reduce((n, u) => n + u, 0);
    return { step, stepIndex: i, totalUsers, byVariant, dropOffRate: 0 };
  });
  for (let i = 1; i < funnelSteps.length; i++) funnelSteps[i].dropOffRate = dropOffRate(funnelSteps[i - 1].totalUsers, funnelSteps[i].totalUsers);
  const first = funnelSteps[0]?.totalUsers ?? 0;
  const last = funnelSteps[funnelSteps.length - 1]?.totalUsers ?? 0;
  return { funnelSteps, variants, overallConversionRate: ratio(last, first) };
}
