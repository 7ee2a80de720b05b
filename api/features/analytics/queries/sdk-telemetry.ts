import type { Analytics } from '../../../../analytics/client';
import { count, numberOrNull, ratio, selectRows } from './clickhouse';
import { VITAL_METRICS } from './site';
import { minutesInWindow, rawInWindow, windowParams, type TimeWindow } from './range';

/**
 * What SDKs reported through POST /api/analytics/sdk-telemetry (docs/analytics-ingestion.md), over
 * the projects the caller may read: their own evaluation summaries (sdk_telemetry), the web vitals
 * they sent (web_vitals / web_vital_minutes, origin 'sdk') and their errors (client_errors, origin
 * 'sdk').
 */

export interface TelemetryFilter {
  projectIds: string[];
  serviceId?: string;
  environment?: string;
  flagKey?: string;
}

/** Rows per list in one answer: the busiest summaries, the most frequent errors. */
export const TELEMETRY_SUMMARIES = 200;
export const TELEMETRY_TOP_ERRORS = 20;
/** Flag keys named per error (those most often active when it happened); a constant in the SQL text. */
export const CORRELATED_FLAGS = 10;

export interface SdkTelemetryReport {
  totalEvaluations: number;
  cacheHitRatio: number;
  evaluationSummaries: {
    flagKey: string;
    variant: string;
    evaluations: number;
    cacheHits: number;
    cacheMisses: number;
    cacheHitRatio: number;
    avgLatencyMs: number | null;
  }[];
  webVitals: { metric: string; count: number; p75: number | null; ratings: { good: number; 'needs-improvement': number; poor: number } }[];
  topErrors: { message: string; count: number; firstSeen: string; lastSeen: string; correlatedFlags: string[] }[];
}

export async function sdkTelemetry(analytics: Analytics, filter: TelemetryFilter, w: TimeWindow): Promise<SdkTelemetryReport> {
  if (filter.projectIds.length === 0) return { totalEvaluations: 0, cacheHitRatio: 0, evaluationSummaries: [], webVitals: [], topErrors: [] };
  const where = ['project_id IN {projectIds:Array(String)}'];
  const params: Record<string, unknown> = { projectIds: filter.projectIds, ...windowParams(w), summaries: TELEMETRY_SUMMARIES, errors: TELEMETRY_TOP_ERRORS };
  if (filter.serviceId !== undefined) {
    where.push('service_id = {serviceId:String}');
    params.serviceId = filter.serviceId;
  }
  if (filter.environment !== undefined) {
    where.push('environment = {environment:String}');
    params.environment = filter.environment;
  }
  const tenant = where.join(' AND ');
  params.flagKey = filter.flagKey ?? '';
  const byFlag = filter.flagKey === undefined ? '' : 'AND flag_key = {flagKey:String}';
  const activeFlag = filter.flagKey === undefined ? '' : 'AND mapContains(active_flags, {flagKey:String})';

  const [summaries, vitals, errors] = await Promise.all([
    selectRows<{ flag_key: string; variant: string; evals: string; hits: string; misses: string; latency_weighted: number; total: string; total_hits: string; total_misses: string }>(
      analytics,
      // Aliases differ from the column names: an alias named like its column would shadow it inside the window sums.
      `SELECT flag_key, variant, sum(evaluations) AS evals, sum(cache_hits) AS hits, sum(cache_misses) AS misses,
              sum(avg_latency_ms * evaluations) AS latency_weighted, sum(evals) OVER () AS total,
              sum(hits) OVER () AS total_hits, sum(misses) OVER () AS total_misses
       FROM sdk_telemetry WHERE ${tenant} AND ${rawInWindow('timestamp')} ${byFlag}
       GROUP BY flag_key, variant ORDER BY evals DESC, flag_key, variant LIMIT {summaries:UInt32}`,
      params,
    ),
    // Vitals of pages with a given flag active are only in the raw rows (the rollup has no flags).
    filter.flagKey === undefined
      ? selectRows<{ name: string; samples: string; p75: number; good: string; ni: string; poor: string }>(
          analytics,
          `SELECT name, sum(samples) AS samples, quantilesTDigestMerge(0.5, 0.75, 0.95)(value_quantiles)[2] AS p75,
                  sum(good) AS good, sum(needs_improvement) AS ni, sum(poor) AS poor
           FROM web_vital_minutes WHERE ${tenant} AND origin = 'sdk' AND ${minutesInWindow('minute')} GROUP BY name`,
          params,
        )
      : selectRows<{ name: string; samples: string; p75: number; good: string; ni: string; poor: string }>(
          analytics,
          `SELECT name, count() AS samples, quantileTDigest(0.75)(value) AS p75,
                  countIf(rating = 'good') AS good, countIf(rating = 'needs-improvement') AS ni, countIf(rating = 'poor') AS poor
           FROM web_vitals WHERE ${tenant} AND origin = 'sdk' AND ${rawInWindow('timestamp')} ${activeFlag} GROUP BY name`,
          params,
        ),
    selectRows<{ message: string; n: string; first_ms: string; last_ms: string; flags: string[] }>(
      analytics,
      `SELECT any(message) AS message, count() AS n,
              toUnixTimestamp64Milli(min(timestamp)) AS first_ms, toUnixTimestamp64Milli(max(timestamp)) AS last_ms,
              topKArray(${CORRELATED_FLAGS})(mapKeys(active_flags)) AS flags
       FROM client_errors WHERE ${tenant} AND origin = 'sdk' AND ${rawInWindow('timestamp')} ${activeFlag}
       GROUP BY fingerprint ORDER BY n DESC, fingerprint LIMIT {errors:UInt32}`,
      params,
    ),
  ]);

  // Totals are over every summary in the window, not only the listed ones.
  const hits = count(summaries[0]?.total_hits);
  const misses = count(summaries[0]?.total_misses);
  return {
    totalEvaluations: count(summaries[0]?.total),
    cacheHitRatio: ratio(hits, hits + misses),
    evaluationSummaries: summaries.map((r) => ({
      flagKey: r.flag_key,
      variant: r.variant,
      evaluations: count(r.evals),
      cacheHits: count(r.hits),
      cacheMisses: count(r.misses),
      cacheHitRatio: ratio(count(r.hits), count(r.hits) + count(r.misses)),
      avgLatencyMs: count(r.evals) > 0 ? count(r.latency_weighted) / count(r.evals) : null,
    })),
    webVitals: VITAL_METRICS.flatMap((metric) => {
      const row = vitals.find((v) => v.name === metric);
      if (!row || count(row.samples) === 0) return [];
      return [{ metric, count: count(row.samples), p75: numberOrNull(row.p75), ratings: { good: count(row.good), 'needs-improvement': count(row.ni), poor: count(row.poor) } }];
    }),
    topErrors: errors.map((r) => ({
      message: r.message,
      count: count(r.n),
      firstSeen: new Date(Number(r.first_ms)).toISOString(),
      lastSeen: new Date(Number(r.last_ms)).toISOString(),
      correlatedFlags: r.flags,
    })),
  };
}
