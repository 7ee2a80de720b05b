import type { Analytics } from '../../../analytics/client';

/**
 * Application outcomes of one flag (docs/insights.md#error-rate): `error` and `latency` outcome
 * events (track and SDK telemetry alike) attributed to the flag per
 * docs/api-reference.md#outcome-events, split into groups. Every reader of outcomes (canary gates,
 * flag metrics, toggle impact, auto-rollback, the production guardrail) counts them through this
 * one query; only the grouping differs:
 *   - a canary gate groups by the side of the canaried rule (`rollout_side` 'in' or 'out');
 *   - the flag insights group every evaluation of the flag into one group.
 * Attribution of an outcome event, over the window [fromMs, toMs):
 *   1. its targeting key was evaluated (rows matching `evaluations`) in the window: the group of
 *      that key's latest such evaluation;
 *   2. otherwise `groupOfFlags` decides from its `flags` map ('' when it does not count);
 *   3. otherwise it does not count.
 * Parameters are bound: callers add their own ({flagKey:String} and those their expressions use).
 */

export interface OutcomeScope {
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
}

export interface OutcomeGrouping {
  /** Condition on evaluation_events rows of the flag that place a targeting key in a group. */
  evaluations: string;
  /** evaluation_events expression: the group of such a row. */
  groupOfEvaluation: string;
  /** Expression over an outcome row `o` whose key has no such evaluation: its group from `o.flags` ('' when none). */
  groupOfFlags: string;
}

export interface OutcomeSummary {
  errors: number;
  /** Latency samples (ms). */
  latencyCount: number;
  latencyMeanMs: number;
  /** Sample variance (n - 1 denominator); 0 below two samples. */
  latencyVarianceMs2: number;
  latencyP50Ms: number | null;
  latencyP99Ms: number | null;
}

export interface OutcomeWindow {
  /** Epoch ms, inclusive. */
  fromMs: number;
  /** Epoch ms, exclusive. */
  toMs: number;
}

/** The events of a flag's evaluations: every evaluation of it. */
export const WHOLE_FLAG: OutcomeGrouping = {
  evaluations: '1',
  groupOfEvaluation: `'flag'`,
  groupOfFlags: `if(mapContains(o.flags, {flagKey:String}), 'flag', '')`,
};

const SCOPE = 'project_id = {projectId:String} AND service_id = {serviceId:String} AND environment = {environment:String}';
const IN_WINDOW = (column: string) =>
  `${column} >= fromUnixTimestamp64Milli({fromMs:Int64}) AND ${column} < fromUnixTimestamp64Milli({toMs:Int64})`;

interface OutcomeRow {
  grp: string;
  bucket: string | number;
  errors: string | number;
  latency_count: string | number;
  latency_mean: number | string | null;
  latency_variance: number | string | null;
  q: (number | string | null)[];
}

export const EMPTY_OUTCOMES: OutcomeSummary = { errors: 0, latencyCount: 0, latencyMeanMs: 0, latencyVarianceMs2: 0, latencyP50Ms: null, latencyP99Ms: null };

/**
 * The outcomes of each group over the window, keyed by group; with `bucketMs`, keyed
 * `group@bucketStartMs` as well (buckets start at fromMs), the whole window staying under the group.
 */
export async function attributedOutcomes(
  analytics: Analytics,
  scope: OutcomeScope,
  grouping: OutcomeGrouping,
  window: OutcomeWindow,
  extraParams: Record<string, unknown> = {},
  bucketMs?: number,
): Promise<Map<string, OutcomeSummary>> {
  const bucket = bucketMs
    ? `toUnixTimestamp64Milli(o.timestamp) - (toUnixTimestamp64Milli(o.timestamp) - {fromMs:Int64}) % {bucketMs:Int64}`
    : 'toInt64(0)';
  const query = `WITH key_groups AS (
      SELECT targeting_key_hash, argMax(${grouping.groupOfEvaluation}, timestamp) AS grp
      FROM evaluation_events
      WHERE ${SCOPE} AND flag_key = {flagKey:String} AND (${grouping.evaluations}) AND targeting_key_hash != '' AND ${IN_WINDOW('timestamp')}
      GROUP BY targeting_key_hash
    ),
    attributed AS (
      SELECT o.event AS event, o.value AS value, ${bucket} AS bucket,
        if(kg.grp != '', kg.grp, ${grouping.groupOfFlags}) AS grp
      FROM outcome_events AS o ANY LEFT JOIN key_groups AS kg ON kg.targeting_key_hash = o.targeting_key_hash
      WHERE o.project_id = {projectId:String} AND o.service_id = {serviceId:String} AND o.environment = {environment:String}
        AND o.event IN ('error', 'latency') AND ${IN_WINDOW('o.timestamp')}
    )
    SELECT grp, bucket, countIf(event = 'error') AS errors,
      countIf(event = 'latency' AND value IS NOT NULL) AS latency_count,
      avgIf(assumeNotNull(value), event = 'latency' AND value IS NOT NULL) AS latency_mean,
      varSampIf(assumeNotNull(value), event = 'latency' AND value IS NOT NULL) AS latency_variance,
      quantilesExactIf(0.5, 0.99)(assumeNotNull(value), event = 'latency' AND value IS NOT NULL) AS q
    FROM attributed WHERE grp != '' GROUP BY GROUPING SETS ((grp), (grp, bucket))`;
  const params = { ...extraParams, ...scope, fromMs: window.fromMs, toMs: window.toMs, bucketMs: bucketMs ?? 0 };
  const rows = (await (await analytics.client.query({ query, query_params: params, format: 'JSONEachRow' })).json()) as OutcomeRow[];
  const result = new Map<string, OutcomeSummary>();
  for (const row of rows) {
    // The (grp) set reads bucket 0; without buckets both sets give the same row.
    const key = bucketMs && Number(row.bucket) !== 0 ? `${row.grp}@${Number(row.bucket)}` : row.grp;
    result.set(key, toSummary(row));
  }
  return result;
}

function toSummary(row: OutcomeRow): OutcomeSummary {
  const latencyCount = Number(row.latency_count);
  return {
    errors: Number(row.errors),
    latencyCount,
    latencyMeanMs: latencyCount ? finite(row.latency_mean) : 0,
    // One sample has no sample variance (ClickHouse answers nan): 0 then.
    latencyVarianceMs2: latencyCount > 1 ? finite(row.latency_variance) : 0,
    latencyP50Ms: latencyCount ? finite(row.q[0]) : null,
    latencyP99Ms: latencyCount ? finite(row.q[1]) : null,
  };
}

function finite(value: number | string | null | undefined): number {
  const n = Number(value);
  return Number.isFinite(n) ? n : 0;
}
