import type { Analytics } from '../../../../analytics/client';
import { count, numberOrNull, parseFlagValues, parseJsonOr, ratio, selectRows, variantLabel } from './clickhouse';
import { bucketOf, minutesInWindow, rawInWindow, windowParams, type TimeWindow } from './range';

/**
 * Browser analytics of one site (docs/api-reference.md#browser-analytics: a site is a service):
 * overview, web vitals, flag impact and the latest events. Counts come from the per-minute rollups
 * (browser_minutes, web_vital_minutes) where the question allows; sessions, flag splits and the
 * event list need the raw rows (browser_events, web_vitals).
 */

export const VITAL_METRICS = ['lcp', 'cls', 'inp', 'ttfb', 'fcp'] as const;
export type VitalMetric = (typeof VITAL_METRICS)[number];

export interface Site {
  projectId: string;
  siteId: string;
}

const siteParams = (site: Site, w: TimeWindow) => ({ projectId: site.projectId, siteId: site.siteId, ...windowParams(w) });
const SITE = 'project_id = {projectId:String} AND service_id = {siteId:String}';

export interface Overview {
  visitors: number;
  pageviews: number;
  avgSessionDuration: number;
  bounceRate: number;
}

/**
 * visitors: distinct visitor ids (the session id for events without one) over every event type;
 * pageviews: pageview events. A session's duration is its last event minus its first; a bounce
 * is a session with one pageview and no click, scroll or custom event, counted among the
 * sessions that had a pageview.
 */
export async function overview(analytics: Analytics, site: Site, w: TimeWindow): Promise<Overview> {
  const params = siteParams(site, w);
  const [totals] = await selectRows<{ visitors: string; pageviews: string }>(
    analytics,
    `SELECT uniqMerge(visitors) AS visitors, sumIf(events, type = 'pageview') AS pageviews
     FROM browser_minutes WHERE ${SITE} AND ${minutesInWindow('minute')}`,
    params,
  );
  const [sessions] = await selectRows<{ avg_duration_ms: number | null; viewed: string; bounced: string }>(
    analytics,
    `SELECT avg(duration_ms) AS avg_duration_ms, countIf(pageviews > 0) AS viewed,
            countIf(pageviews = 1 AND interactions = 0) AS bounced
     FROM (
       SELECT session_id,
              toUnixTimestamp64Milli(max(timestamp)) - toUnixTimestamp64Milli(min(timestamp)) AS duration_ms,
              countIf(type = 'pageview') AS pageviews,
              countIf(type IN ('click', 'scroll', 'custom')) AS interactions
       FROM browser_events
       WHERE ${SITE} AND ${rawInWindow('timestamp')} AND session_id != ''
       GROUP BY session_id
     )`,
    params,
  );
  return {
    visitors: count(totals?.visitors),
    pageviews: count(totals?.pageviews),
    avgSessionDuration: Math.round(numberOrNull(sessions?.avg_duration_ms) ?? 0),
    bounceRate: ratio(count(sessions?.bounced), count(sessions?.viewed)),
  };
}

export interface VitalSummary {
  metric: VitalMetric;
  p50: number | null;
  p75: number | null;
  p95: number | null;
  count: number;
}

export interface VitalPoint extends VitalSummary {
  timestamp: string;
}

interface VitalRow {
  name: VitalMetric;
  bucket?: number;
  samples: string;
  q: [number, number, number];
}

/**
 * p50/p75/p95 per metric (t-digest, quantilesTDigest: about 1% relative error) over every
 * origin (browser and SDK). Without `flagKey` from web_vital_minutes; with it, from the raw
 * web_vitals rows whose page had that flag active.
 */
export async function vitals(analytics: Analytics, site: Site, w: TimeWindow, flagKey?: string): Promise<{ vitals: VitalSummary[]; timeSeries: VitalPoint[] }> {
  const params = { ...siteParams(site, w), flagKey: flagKey ?? '' };
  const source = flagKey
    ? { table: 'web_vitals', time: 'timestamp', filter: `${rawInWindow('timestamp')} AND mapContains(active_flags, {flagKey:String})`, samples: 'count()', q: 'quantilesTDigest(0.5, 0.75, 0.95)(value)' }
    : { table: 'web_vital_minutes', time: 'minute', filter: minutesInWindow('minute'), samples: 'sum(samples)', q: 'quantilesTDigestMerge(0.5, 0.75, 0.95)(value_quantiles)' };
  const select = (grouping: string, extra: string) =>
    `SELECT name, ${extra} ${source.samples} AS samples, ${source.q} AS q
     FROM ${source.table} WHERE ${SITE} AND ${source.filter} AND name IN {metrics:Array(String)}
     GROUP BY ${grouping}`;
  const all = { ...params, metrics: [...VITAL_METRICS] };
  const [totals, series] = await Promise.all([
    selectRows<VitalRow>(analytics, select('name', ''), all),
    selectRows<VitalRow>(analytics, `${select('name, bucket', `${bucketOf(source.time)} AS bucket,`)} ORDER BY bucket, name`, all),
  ]);
  const summary = (row: VitalRow | undefined, metric: VitalMetric): VitalSummary => {
    const samples = count(row?.samples);
    return samples === 0 || !row
      ? { metric, p50: null, p75: null, p95: null, count: 0 }
      : { metric, p50: numberOrNull(row.q[0]), p75: numberOrNull(row.q[1]), p95: numberOrNull(row.q[2]), count: samples };
  };
  return {
    vitals: VITAL_METRICS.map((metric) => summary(totals.find((r) => r.name === metric), metric)),
    timeSeries: series.map((row) => ({ timestamp: new Date(Number(row.bucket) * 1000).toISOString(), ...summary(row, row.name) })),
  };
}

export interface FlagImpact {
  flagKey: string;
  variants: { variant: string; pageviews: number; sessions: number; lcpP75: number | null; avgCls: number | null }[];
}

/** Flags shown in one answer, the most viewed first. */
export const FLAG_IMPACT_FLAGS = 50;

/**
 * Per flag and value the pages had: pageviews and distinct sessions (browser_events), LCP p75
 * (t-digest) and mean CLS (web_vitals), both from raw rows since the rollups carry no flags.
 */
export async function flagImpact(analytics: Analytics, site: Site, w: TimeWindow): Promise<FlagImpact[]> {
  const params = { ...siteParams(site, w), limit: FLAG_IMPACT_FLAGS };
  const [views, perf] = await Promise.all([
    selectRows<{ flag_key: string; value: string; pageviews: string; sessions: string }>(
      analytics,
      `SELECT flag.1 AS flag_key, flag.2 AS value, count() AS pageviews, uniqExact(session_id) AS sessions
       FROM browser_events ARRAY JOIN CAST(flags, 'Array(Tuple(String, String))') AS flag
       WHERE ${SITE} AND ${rawInWindow('timestamp')} AND type = 'pageview'
       GROUP BY flag_key, value`,
      params,
    ),
    selectRows<{ flag_key: string; value: string; lcp_p75: number | null; avg_cls: number | null }>(
      analytics,
      `SELECT flag.1 AS flag_key, flag.2 AS value,
              if(countIf(name = 'lcp') = 0, NULL, quantileTDigestIf(0.75)(value_metric, name = 'lcp')) AS lcp_p75,
              if(countIf(name = 'cls') = 0, NULL, avgIf(value_metric, name = 'cls')) AS avg_cls
       FROM (SELECT name, value AS value_metric, active_flags FROM web_vitals
             WHERE ${SITE} AND ${rawInWindow('timestamp')} AND name IN ('lcp', 'cls'))
       ARRAY JOIN CAST(active_flags, 'Array(Tuple(String, String))') AS flag
       GROUP BY flag_key, value`,
      params,
    ),
  ]);
  const byFlag = new Map<string, Map<string, FlagImpact['variants'][number]>>();
  const entry = (flagKey: string, value: string) => {
    const variants = byFlag.get(flagKey) ?? new Map();
    byFlag.set(flagKey, variants);
    const variant = variantLabel(value);
    const found = variants.get(variant) ?? { variant, pageviews: 0, sessions: 0, lcpP75: null, avgCls: null };
    variants.set(variant, found);
    return found;
  };
  for (const row of views) Object.assign(entry(row.flag_key, row.value), { pageviews: count(row.pageviews), sessions: count(row.sessions) });
  for (const row of perf) Object.assign(entry(row.flag_key, row.value), { lcpP75: numberOrNull(row.lcp_p75), avgCls: numberOrNull(row.avg_cls) });
  const impact = [...byFlag].map(([flagKey, variants]) => ({
    flagKey,
    variants: [...variants.values()].sort((a, b) => b.pageviews - a.pageviews || a.variant.localeCompare(b.variant)),
  }));
  const views_ = (f: FlagImpact) => f.variants.reduce((n, v) => n + v.pageviews, 0);
  return impact.sort((a, b) => views_(b) - views_(a) || a.flagKey.localeCompare(b.flagKey)).slice(0, FLAG_IMPACT_FLAGS);
}

export interface SiteEvent {
  id: string;
  type: string;
  url: string;
  timestamp: string;
  country: string;
  browser: string;
  os: string;
  device: string;
  flags: Record<string, unknown>;
  data: unknown;
}

/** The latest events of the site, newest first (browser_events; no time range). */
export async function latestEvents(analytics: Analytics, site: Site, limit: number): Promise<SiteEvent[]> {
  const rows = await selectRows<{
    event_id: string;
    type: string;
    url: string;
    ms: string;
    country: string;
    browser: string;
    os: string;
    device: string;
    flags: Record<string, string>;
    data: string;
  }>(
    analytics,
    `SELECT event_id, type, url, toUnixTimestamp64Milli(timestamp) AS ms, country, browser, os, device, flags, data
     FROM browser_events WHERE ${SITE}
     ORDER BY timestamp DESC, event_id LIMIT {limit:UInt32}`,
    { projectId: site.projectId, siteId: site.siteId, limit },
  );
  return rows.map((r) => ({
    id: r.event_id,
    type: r.type,
    url: r.url,
    timestamp: new Date(Number(r.ms)).toISOString(),
    country: r.country,
    browser: r.browser,
    os: r.os,
    device: r.device,
    flags: parseFlagValues(r.flags),
    data: parseJsonOr(r.data, {}),
  }));
}
