import type { Analytics } from '../../../analytics/client';
import { attributedOutcomes, EMPTY_OUTCOMES, outcomesOf, summaryOf, WHOLE_FLAG, WHOLE_FLAG_GROUP, type AttributedOutcomes, type OutcomeSummary } from '../../lib/release-safety/outcomes';
import { floorMinute, MINUTE_MS, type MinuteWindow, type TimeSpan } from './window';

/**
 * The ClickHouse reads of the flag insights. Everything a window of whole minutes can answer
 * comes from the per-minute rollup evaluation_minutes (011 and 033: sum() of the counters,
 * quantilesExactWeightedMerge of the latency histograms, always grouped). The raw evaluation_events table is
 * read only for what minutes cannot say: sliding windows that end now and the exact time of the
 * last evaluation (`realtime`), both a primary-key range of one flag's last minutes. Client errors
 * have no rollup; the spike alert counts raw client_errors rows of the last 65 minutes.
 * Windows to the millisecond (around a change) read the rollup for their whole minutes and the raw
 * rows for the partial minutes at each edge. Errors are application outcomes attributed to the
 * flag (attributedOutcomes, the query canary gates use; docs/insights.md#error-rate), always read
 * raw; failed evaluations are counted apart (`evaluationErrors`).
 * Parameters are always bound ({name:Type}); no value is ever spliced into the text.
 */

export interface FlagScope {
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
}

/** Counters and latency of a set of evaluations; latencies are null when there were none. */
export interface EvaluationStats {
  evaluations: number;
  /** Application outcomes: `error` events attributed to the flag (docs/insights.md#error-rate). */
  errors: number;
  /** Evaluations that failed (error_code != ''). */
  evaluationErrors: number;
  latencySumMs: number;
  p50LatencyMs: number | null;
  p95LatencyMs: number | null;
  p99LatencyMs: number | null;
}

export interface RealtimeCounts {
  lastMinute: number;
  last5Min: number;
  /** Evaluations 5 to 10 minutes ago (the trend compares them with the last 5). */
  previous5Min: number;
  errorsLastMinute: number;
  evaluationErrorsLastMinute: number;
  topReason: string | null;
  lastEvaluatedAtMs: number | null;
}

export interface FlagActivity {
  serviceId: string;
  environment: string;
  flagKey: string;
  lastEvaluatedAtMs: number;
}

export interface GroupedStats extends EvaluationStats {
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
  /** Which grouping the row is: one flag, one service, or the whole project. */
  level: 'flag' | 'service' | 'project';
}

const FLAG_FILTER =
  'project_id = {projectId:String} AND service_id = {serviceId:String} AND environment = {environment:String} AND flag_key = {flagKey:String}';
const IN_WINDOW = 'minute >= toDateTime({startS:UInt32}) AND minute < toDateTime({endS:UInt32})';
// Aliases differ from the columns: an alias named like a column would replace it inside the other aggregates.
const STATS_COLUMNS = `sum(evaluations) AS total_evaluations, sumIf(evaluations, error_code != '') AS total_evaluation_errors,
  sum(latency_sum) AS total_latency, quantilesExactWeightedMerge(0.5, 0.95, 0.99)(latency_histogram) AS q`;

interface StatsRow {
  total_evaluations: string | number;
  total_evaluation_errors: string | number;
  total_latency: string | number;
  q: (number | string | null)[];
}

const windowParams = (w: MinuteWindow) => ({ startS: w.startMs / 1000, endS: w.endMs / 1000 });

export class EvaluationWarehouse {
  constructor(private readonly analytics: Analytics) {}

  /**
   * One flag's counters and percentiles over a span to the millisecond: the rollup for its whole
   * minutes, the raw rows for the partial minutes at either edge; and its application outcomes.
   */
  async flagStats(scope: FlagScope, span: TimeSpan): Promise<EvaluationStats> {
    const firstWholeMs = Math.ceil(span.startMs / MINUTE_MS) * MINUTE_MS;
    const lastWholeMs = floorMinute(span.endMs);
    // Without a whole minute inside, the raw rows answer it all.
    const [wholeStartMs, wholeEndMs] = firstWholeMs < lastWholeMs ? [firstWholeMs, lastWholeMs] : [span.endMs, span.endMs];
    const [[row], outcomes] = await Promise.all([
      this.select<StatsRow>(
        `SELECT sum(n) AS total_evaluations, sum(e) AS total_evaluation_errors, sum(l) AS total_latency, quantilesExactWeightedMerge(0.5, 0.95, 0.99)(st) AS q
         FROM (
           SELECT sum(evaluations) AS n, sumIf(evaluations, error_code != '') AS e, sum(latency_sum) AS l,
                  quantilesExactWeightedMergeState(0.5, 0.95, 0.99)(latency_histogram) AS st
           FROM evaluation_minutes WHERE ${FLAG_FILTER}
             AND minute >= fromUnixTimestamp64Milli({wholeStartMs:Int64}) AND minute < fromUnixTimestamp64Milli({wholeEndMs:Int64})
           UNION ALL
           SELECT sum(weight) AS n, sumIf(weight, error_code != '') AS e, sum(toFloat64(latency_ms) * weight) AS l,
                  quantilesExactWeightedState(0.5, 0.95, 0.99)(latency_ms, weight) AS st
           FROM (SELECT latency_ms, error_code, evaluations AS weight FROM evaluation_events WHERE ${FLAG_FILTER}
             AND ((timestamp >= fromUnixTimestamp64Milli({startMs:Int64}) AND timestamp < fromUnixTimestamp64Milli({wholeStartMs:Int64}))
               OR (timestamp >= fromUnixTimestamp64Milli({wholeEndMs:Int64}) AND timestamp < fromUnixTimestamp64Milli({endMs:Int64}))))
         )`,
        { ...scope, startMs: span.startMs, endMs: span.endMs, wholeStartMs, wholeEndMs },
      ),
      this.flagOutcomes(scope, span),
    ]);
    return toStats(row, outcomesOf(outcomes, WHOLE_FLAG_GROUP));
  }

  /** Application outcomes attributed to one flag over a span (with `bucketMinutes`, also per bucket). */
  private flagOutcomes(scope: FlagScope, span: TimeSpan, bucketMinutes?: number): Promise<AttributedOutcomes[]> {
    const { projectId, serviceId, environment, flagKey } = scope;
    return attributedOutcomes(this.analytics, { projectIds: [projectId], serviceId, environment, flagKey }, WHOLE_FLAG, { fromMs: span.startMs, toMs: span.endMs }, {
      bucketMs: bucketMinutes && bucketMinutes * MINUTE_MS,
    });
  }

  /**
   * One flag's totals over a window and its series: one entry per bucket that had evaluations,
   * keyed by the bucket's start (epoch ms). One scan: each bucket keeps its merged t-digest state,
   * and the totals merge those few states instead of reading the rows again.
   */
  async flagSeries(scope: FlagScope, window: MinuteWindow, bucketMinutes: number): Promise<{ total: EvaluationStats; buckets: Map<number, EvaluationStats> }> {
    // The totals row is the empty grouping set, whose bucket reads 0 (no real bucket starts in 1970).
    const rowsQuery = this.select<StatsRow & { bucket: string | number }>(
      `SELECT bucket, sum(n) AS total_evaluations, sum(e) AS total_evaluation_errors, sum(l) AS total_latency, quantilesExactWeightedMerge(0.5, 0.95, 0.99)(st) AS q
       FROM (
         SELECT toUInt32(minute) - (toUInt32(minute) - {startS:UInt32}) % {bucketS:UInt32} AS bucket, sum(evaluations) AS n,
                sumIf(evaluations, error_code != '') AS e, sum(latency_sum) AS l, quantilesExactWeightedMergeState(0.5, 0.95, 0.99)(latency_histogram) AS st
         FROM evaluation_minutes WHERE ${FLAG_FILTER} AND ${IN_WINDOW} GROUP BY bucket
       )
       GROUP BY GROUPING SETS ((bucket), ())`,
      { ...scope, ...windowParams(window), bucketS: bucketMinutes * 60 },
    );
    const [rows, outcomes] = await Promise.all([rowsQuery, this.flagOutcomes(scope, window, bucketMinutes)]);
    const total = rows.find((r) => Number(r.bucket) === 0);
    const buckets = new Map(rows.filter((r) => Number(r.bucket) !== 0).map((r) => [Number(r.bucket) * 1000, toStats(r)]));
    // A bucket may have outcomes without evaluations (a key evaluated earlier in the range).
    for (const o of outcomes) {
      if (o.bucketMs !== null) buckets.set(o.bucketMs, { ...(buckets.get(o.bucketMs) ?? toStats(undefined)), errors: o.errors });
    }
    return { total: toStats(total, outcomesOf(outcomes, WHOLE_FLAG_GROUP)), buckets };
  }

  /** Evaluations per reason and per value (JSON text, cut to 128 characters by the rollup), in one scan. */
  async flagBreakdowns(scope: FlagScope, window: MinuteWindow): Promise<{ reasons: Record<string, number>; values: Record<string, number> }> {
    const rows = await this.select<{ reason: string; value: string; n: string | number; by_value: number }>(
      `SELECT reason, value, sum(evaluations) AS n, grouping(reason) AS by_value FROM evaluation_minutes WHERE ${FLAG_FILTER} AND ${IN_WINDOW}
       GROUP BY GROUPING SETS ((reason), (value)) ORDER BY n DESC, reason, value LIMIT 100 BY by_value`,
      { ...scope, ...windowParams(window) },
    );
    const reasons: Record<string, number> = {};
    const values: Record<string, number> = {};
    for (const r of rows) {
      if (Number(r.by_value)) values[r.value] = Number(r.n);
      else reasons[r.reason] = Number(r.n);
    }
    return { reasons, values };
  }

  /**
   * Sliding windows ending at `nowMs` (raw rows: a minute rollup cannot answer "the last 60
   * seconds"), and the exact time of the last evaluation since `sinceMs`.
   */
  async flagRealtime(scope: FlagScope, nowMs: number, sinceMs: number): Promise<RealtimeCounts> {
    const params = { ...scope, nowMs, m1: nowMs - 60_000, m5: nowMs - 300_000, m10: nowMs - 600_000, sinceMs };
    const [[counts], [last], outcomes] = await Promise.all([
      this.select<{ last1: string; last5: string; prev5: string; evaluation_errors1: string; top: string[] }>(
        `SELECT sumIf(evaluations, timestamp > fromUnixTimestamp64Milli({m1:Int64})) AS last1,
                sumIf(evaluations, timestamp > fromUnixTimestamp64Milli({m5:Int64})) AS last5,
                sumIf(evaluations, timestamp <= fromUnixTimestamp64Milli({m5:Int64})) AS prev5,
                sumIf(evaluations, timestamp > fromUnixTimestamp64Milli({m1:Int64}) AND error_code != '') AS evaluation_errors1,
                topKWeightedIf(1)(reason, evaluations, timestamp > fromUnixTimestamp64Milli({m5:Int64})) AS top
         FROM evaluation_events
         WHERE ${FLAG_FILTER} AND timestamp > fromUnixTimestamp64Milli({m10:Int64}) AND timestamp <= fromUnixTimestamp64Milli({nowMs:Int64})`,
        params,
      ),
      // Read in sort-key order from the newest part: stops at the first row.
      this.select<{ at: string | number }>(
        `SELECT toUnixTimestamp64Milli(timestamp) AS at FROM evaluation_events
         WHERE ${FLAG_FILTER} AND timestamp >= fromUnixTimestamp64Milli({sinceMs:Int64}) AND timestamp <= fromUnixTimestamp64Milli({nowMs:Int64})
         ORDER BY timestamp DESC LIMIT 1`,
        params,
      ),
      // The last 60 s to the millisecond, now included.
      this.flagOutcomes(scope, { startMs: nowMs - 60_000 + 1, endMs: nowMs + 1 }),
    ]);
    return {
      lastMinute: Number(counts.last1),
      last5Min: Number(counts.last5),
      previous5Min: Number(counts.prev5),
      errorsLastMinute: outcomesOf(outcomes, WHOLE_FLAG_GROUP).errors,
      evaluationErrorsLastMinute: Number(counts.evaluation_errors1),
      topReason: counts.top[0] ?? null,
      lastEvaluatedAtMs: last ? Number(last.at) : null,
    };
  }

  /** The minute of the last evaluation of every flag of a project that has any in the rollup. */
  async projectActivity(projectId: string): Promise<FlagActivity[]> {
    const rows = await this.select<{ service_id: string; environment: string; flag_key: string; last: string | number }>(
      `SELECT service_id, environment, flag_key, toUInt32(max(minute)) AS last FROM evaluation_minutes
       WHERE project_id = {projectId:String} GROUP BY service_id, environment, flag_key`,
      { projectId },
    );
    return rows.map((r) => ({ serviceId: r.service_id, environment: r.environment, flagKey: r.flag_key, lastEvaluatedAtMs: Number(r.last) * 1000 }));
  }

  /**
   * Counters and percentiles of every flag, every service and each whole project among
   * `projectIds` over a window, in one pass (GROUPING SETS).
   */
  async groupedStats(projectIds: string[], window: MinuteWindow): Promise<GroupedStats[]> {
    if (!projectIds.length) return [];
    const [rows, outcomes] = await Promise.all([
      this.select<StatsRow & { project_id: string; service_id: string; environment: string; flag_key: string }>(
        `SELECT project_id, service_id, environment, flag_key, ${STATS_COLUMNS}
         FROM evaluation_minutes WHERE project_id IN {projectIds:Array(String)} AND ${IN_WINDOW}
         GROUP BY GROUPING SETS ((project_id, service_id, environment, flag_key), (project_id, service_id), (project_id))`,
        { projectIds, ...windowParams(window) },
      ),
      attributedOutcomes(this.analytics, { projectIds }, WHOLE_FLAG, { fromMs: window.startMs, toMs: window.endMs }, { totals: true }),
    ]);
    const outcomeOf = (level: GroupedStats['level'], r: { project_id: string; service_id: string; environment: string; flag_key: string }): OutcomeSummary => {
      const found = outcomes.find((o) =>
        level === 'flag'
          ? o.level === 'group' && o.projectId === r.project_id && o.serviceId === r.service_id && o.environment === r.environment && o.flagKey === r.flag_key
          : o.level === (level === 'service' ? 'service' : 'project') && o.projectId === r.project_id && (level === 'project' || o.serviceId === r.service_id),
      );
      return found ? summaryOf(found) : EMPTY_OUTCOMES;
    };
    // A column outside a row's grouping set reads as '' (ids and keys are never empty).
    return rows.map((r) => {
      const level: GroupedStats['level'] = r.service_id === '' ? 'project' : r.flag_key === '' ? 'service' : 'flag';
      return { projectId: r.project_id, serviceId: r.service_id, environment: r.environment, flagKey: r.flag_key, level, ...toStats(r, outcomeOf(level, r)) };
    });
  }

  /** Evaluations per project over a window. */
  async projectTotals(projectIds: string[], window: MinuteWindow): Promise<Map<string, number>> {
    if (!projectIds.length) return new Map();
    const rows = await this.select<{ project_id: string; n: string | number }>(
      `SELECT project_id, sum(evaluations) AS n FROM evaluation_minutes
       WHERE project_id IN {projectIds:Array(String)} AND ${IN_WINDOW} GROUP BY project_id`,
      { projectIds, ...windowParams(window) },
    );
    return new Map(rows.map((r) => [r.project_id, Number(r.n)]));
  }

  /** Client errors per project over a window (raw rows: the table has no rollup). */
  async clientErrorTotals(projectIds: string[], window: MinuteWindow): Promise<Map<string, number>> {
    if (!projectIds.length) return new Map();
    const rows = await this.select<{ project_id: string; n: string | number }>(
      `SELECT project_id, count() AS n FROM client_errors
       WHERE project_id IN {projectIds:Array(String)}
         AND timestamp >= fromUnixTimestamp64Milli({startMs:Int64}) AND timestamp < fromUnixTimestamp64Milli({endMs:Int64})
       GROUP BY project_id`,
      { projectIds, startMs: window.startMs, endMs: window.endMs },
    );
    return new Map(rows.map((r) => [r.project_id, Number(r.n)]));
  }

  /** Evaluations per (service, flag, bucket) of a project, optionally one service and one environment. */
  async heatmapCells(
    filter: { projectId: string; serviceId?: string; environment?: string },
    window: MinuteWindow,
    bucketMinutes: number,
  ): Promise<{ serviceId: string; flagKey: string; bucketMs: number; evaluations: number }[]> {
    const rows = await this.select<{ service_id: string; flag_key: string; bucket: string | number; n: string | number }>(
      `SELECT service_id, flag_key, toUInt32(minute) - (toUInt32(minute) - {startS:UInt32}) % {bucketS:UInt32} AS bucket, sum(evaluations) AS n
       FROM evaluation_minutes
       WHERE project_id = {projectId:String} AND ${IN_WINDOW}
         AND ({serviceId:String} = '' OR service_id = {serviceId:String})
         AND ({environment:String} = '' OR environment = {environment:String})
       GROUP BY service_id, flag_key, bucket`,
      { projectId: filter.projectId, serviceId: filter.serviceId ?? '', environment: filter.environment ?? '', ...windowParams(window), bucketS: bucketMinutes * 60 },
    );
    return rows.map((r) => ({ serviceId: r.service_id, flagKey: r.flag_key, bucketMs: Number(r.bucket) * 1000, evaluations: Number(r.n) }));
  }

  private async select<T>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const rs = await this.analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
    return (await rs.json()) as T[];
  }
}

/** A NaN or null quantile (no evaluations) is null. */
function finiteOrNull(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

function toStats(row: StatsRow | undefined, outcomes: OutcomeSummary = EMPTY_OUTCOMES): EvaluationStats {
  const evaluations = Number(row?.total_evaluations ?? 0);
  const q = evaluations > 0 ? (row?.q ?? []) : [];
  return {
    evaluations,
    errors: outcomes.errors,
    evaluationErrors: Number(row?.total_evaluation_errors ?? 0),
    latencySumMs: Number(row?.total_latency ?? 0),
    p50LatencyMs: finiteOrNull(q[0]),
    p95LatencyMs: finiteOrNull(q[1]),
    p99LatencyMs: finiteOrNull(q[2]),
  };
}
