import type { Analytics } from '../../../analytics/client';

/**
 * Application outcomes attributed to flags (docs/insights.md#error-rate): `error` and `latency`
 * outcome events (track and SDK telemetry alike) attributed per
 * docs/api-reference.md#outcome-events, split into groups. Every reader of outcomes (canary gates,
 * flag metrics, toggle impact, auto-rollback, the production guardrail, project health, alerts)
 * counts them through this one query; only the grouping differs:
 *   - a canary gate groups one flag's outcomes by the side of the canaried rule (`rollout_side`);
 *   - the flag insights put every evaluation of a flag in one group (WHOLE_FLAG), of one flag or
 *     of every flag of some projects.
 * An outcome event goes, within its project, service and environment, over [fromMs, toMs):
 *   - to the group of its targeting key's latest evaluation (rows matching `evaluations`) of each
 *     flag in the window (the flag's last value for that key);
 *   - and, through `groupsOf`, to what its `flags` map names.
 * One outcome event counts once per flag; the service and project totals count it once when it
 * went to any flag. Parameters are bound: callers add those their expressions use.
 */

export interface OutcomeScope {
  projectIds: string[];
  /** Narrow to one service, environment or flag. */
  serviceId?: string;
  environment?: string;
  flagKey?: string;
}

export interface OutcomeGrouping {
  /** Condition on evaluation_events rows that place a targeting key in a group. */
  evaluations: string;
  /** evaluation_events expression: the group of such a row. */
  groupOfEvaluation: string;
  /**
   * The groups of an outcome row `o`, Array(Tuple(flag key, group)), given `keyGroups`, those of
   * its targeting key's evaluations in the window.
   */
  groupsOf: (keyGroups: string) => string;
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

export interface AttributedOutcomes extends OutcomeSummary {
  /** `group`: one flag's group (per bucket when `bucketMs` is set); `service`, `project`: outcomes that went to any flag. */
  level: 'group' | 'service' | 'project';
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
  group: string;
  /** Start of the bucket (epoch ms); null for the whole window. */
  bucketMs: number | null;
}

/** Every evaluation of a flag in one group, `flag`; an outcome naming a flag in `flags` goes to that flag as well. */
export const WHOLE_FLAG: OutcomeGrouping = {
  evaluations: '1',
  groupOfEvaluation: `'flag'`,
  groupsOf: (keyGroups) =>
    `arrayDistinct(arrayConcat(${keyGroups}, arrayMap(f -> (f, 'flag'), arrayFilter(f -> {flagKey:String} = '' OR f = {flagKey:String}, mapKeys(o.flags)))))`,
};
export const WHOLE_FLAG_GROUP = 'flag';

const scopeOf = (alias: string) =>
  `${alias}project_id IN {projectIds:Array(String)} AND ({serviceId:String} = '' OR ${alias}service_id = {serviceId:String})
   AND ({environment:String} = '' OR ${alias}environment = {environment:String})`;
const IN_WINDOW = (column: string) =>
  `${column} >= fromUnixTimestamp64Milli({fromMs:Int64}) AND ${column} < fromUnixTimestamp64Milli({toMs:Int64})`;
const AGGREGATES = `countIf(event = 'error') AS errors,
  countIf(event = 'latency' AND value IS NOT NULL) AS latency_count,
  avgIf(assumeNotNull(value), event = 'latency' AND value IS NOT NULL) AS latency_mean,
  varSampIf(assumeNotNull(value), event = 'latency' AND value IS NOT NULL) AS latency_variance,
  quantilesExactIf(0.5, 0.99)(assumeNotNull(value), event = 'latency' AND value IS NOT NULL) AS q`;

interface OutcomeRow {
  level: AttributedOutcomes['level'];
  project_id: string;
  service_id: string;
  environment: string;
  flag_key: string;
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
 * The outcomes of each (flag, group) over the window; with `bucketMs`, also per bucket (buckets
 * start at fromMs); with `totals`, also per service and per project.
 */
export async function attributedOutcomes(
  analytics: Analytics,
  scope: OutcomeScope,
  grouping: OutcomeGrouping,
  window: OutcomeWindow,
  opts: { params?: Record<string, unknown>; bucketMs?: number; totals?: boolean } = {},
): Promise<AttributedOutcomes[]> {
  const bucket = opts.bucketMs
    ? `toUnixTimestamp64Milli(o.timestamp) - (toUnixTimestamp64Milli(o.timestamp) - {fromMs:Int64}) % {bucketMs:Int64}`
    : 'toInt64(0)';
  const groupingSets = opts.bucketMs
    ? 'GROUPING SETS ((project_id, service_id, environment, flag_key, grp), (project_id, service_id, environment, flag_key, grp, bucket))'
    : '(project_id, service_id, environment, flag_key, grp, bucket)';
  // Joined on the key alone (a one-column string join is several times faster in ClickHouse); the
  // key's groups of the outcome's own project, service and environment are then picked from the array.
  const keyGroups = `arrayMap(x -> (x.4, x.5), arrayFilter(x -> x.1 = o.project_id AND x.2 = o.service_id AND x.3 = o.environment, k.groups))`;
  const query = `WITH key_groups AS (
      SELECT targeting_key_hash, groupArray((project_id, service_id, environment, flag_key, grp)) AS groups FROM (
        SELECT project_id, service_id, environment, toString(flag_key) AS flag_key, targeting_key_hash, toString(argMax(${grouping.groupOfEvaluation}, timestamp)) AS grp
        FROM evaluation_events
        WHERE ${scopeOf('')} AND ({flagKey:String} = '' OR flag_key = {flagKey:String}) AND (${grouping.evaluations})
          AND targeting_key_hash != '' AND ${IN_WINDOW('timestamp')}
        GROUP BY project_id, service_id, environment, flag_key, targeting_key_hash)
      GROUP BY targeting_key_hash
    ),
    attributed AS (
      SELECT o.project_id AS project_id, o.service_id AS service_id, o.environment AS environment, o.event AS event, o.value AS value,
        ${bucket} AS bucket, ${grouping.groupsOf(keyGroups)} AS groups
      FROM outcome_events AS o ANY LEFT JOIN key_groups AS k ON k.targeting_key_hash = o.targeting_key_hash
      WHERE ${scopeOf('o.')} AND o.event IN ('error', 'latency') AND ${IN_WINDOW('o.timestamp')}
    )
    SELECT 'group' AS level, project_id, service_id, environment, g.1 AS flag_key, g.2 AS grp, bucket, ${AGGREGATES}
    FROM attributed ARRAY JOIN groups AS g GROUP BY ${groupingSets}
    ${
      opts.totals
        ? `UNION ALL
    SELECT if(service_id = '', 'project', 'service') AS level, project_id, service_id, '' AS environment, '' AS flag_key, '' AS grp, toInt64(0) AS bucket, ${AGGREGATES}
    FROM attributed WHERE notEmpty(groups) GROUP BY GROUPING SETS ((project_id, service_id), (project_id))`
        : ''
    }`;
  const params = {
    ...opts.params,
    projectIds: scope.projectIds,
    serviceId: scope.serviceId ?? '',
    environment: scope.environment ?? '',
    flagKey: scope.flagKey ?? '',
    fromMs: window.fromMs,
    toMs: window.toMs,
    bucketMs: opts.bucketMs ?? 0,
  };
  const rows = (await (await analytics.client.query({ query, query_params: params, format: 'JSONEachRow' })).json()) as OutcomeRow[];
  // In the whole-window grouping set the bucket reads 0 (no real bucket starts in 1970).
  return rows.map((row) => ({
    level: row.level,
    projectId: row.project_id,
    serviceId: row.service_id,
    environment: row.environment,
    flagKey: row.flag_key,
    group: row.grp,
    bucketMs: opts.bucketMs && Number(row.bucket) !== 0 ? Number(row.bucket) : null,
    ...toSummary(row),
  }));
}

/** The whole-window outcomes of one group of a one-flag query. */
export function outcomesOf(rows: AttributedOutcomes[], group: string): OutcomeSummary {
  const row = rows.find((r) => r.level === 'group' && r.group === group && r.bucketMs === null);
  return row ? summaryOf(row) : EMPTY_OUTCOMES;
}

/** Just the counts and latency of a row. */
export function summaryOf(row: OutcomeSummary): OutcomeSummary {
  const { errors, latencyCount, latencyMeanMs, latencyVarianceMs2, latencyP50Ms, latencyP99Ms } = row;
  return { errors, latencyCount, latencyMeanMs, latencyVarianceMs2, latencyP50Ms, latencyP99Ms };
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
