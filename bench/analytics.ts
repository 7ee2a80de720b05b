/**
 * `npm run bench:analytics` (docs/quality-bars.md#analytics): the analytics warehouse on chDB (in
 * this process, a fresh temporary data path; CLICKHOUSE_URL is ignored).
 *
 * 1. Ingest through the one writer every producer uses (createAnalyticsWriter: the evaluation
 *    recorder beside the other tables' writers, settings from the configuration): BENCH_EVENTS
 *    (10 million) evaluation events, then a tenth as many browser events and a tenth as many
 *    outcome events, all spread in time order over the 30 days before the bench started. Each
 *    table is produced as fast as its writer's memory bound admits rows; reported: rows/s per
 *    table (until its last row is written) and overall, the writer's drops, process RSS.
 * 2. Query latency after one warm-up, median and max of BENCH_RUNS (5) runs: flag metrics (the
 *    three ClickHouse reads of GET .../metrics, as InsightsService.metrics runs them), vitals,
 *    flag variants, funnel, evaluation heatmap, through the query modules' own functions; each
 *    beside the same question written here against the raw tables, whose counts must match.
 * 3. Live ingest: the same traffic again, stamped with its arrival time (as production writes
 *    it), every table's producer at once (as a running service has them), into a database of its own. The ingest bar applies to it; the 30-day backfill of step 1
 *    is reported beside it (there nearly every event is its own rollup row, the worst case).
 * 4. A table of the figures with their bars (yes/NO).
 *
 * The traffic: one project, 2 services, 200 flags with Zipf popularity (the busiest takes about
 * 17% of evaluations), requests of 1-8 flags for one of 100,000 users; per flag and user a
 * stable outcome (rules, partial rollouts with in/out sides, variants), 1% errors; browser
 * sessions on the web service; visits with a view -> add_to_cart -> purchase funnel, reserved
 * error and latency outcomes, 30% of outcomes naming the flag values the client saw.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openAnalytics, type Analytics } from '../analytics/client';
import { migrateAnalytics } from '../analytics/migrate';
import type { BrowserEventRow, BrowserEventType, OutcomeRow } from '../analytics/rows';
import type { TableWriterStats } from '../analytics/writer';
import { parseConfig } from '../api/config';
import { JOIN_LAST_VALUES, ATTRIBUTED_VALUE, lastValuesCte, scopeCondition, scopeParams, type OutcomeScope } from '../api/features/analytics/queries/attribution';
import { selectRows, variantLabel } from '../api/features/analytics/queries/clickhouse';
import { flagFunnel } from '../api/features/analytics/queries/funnel';
import { bucketOf, rawInWindow, windowOf, windowParams, type RangeName } from '../api/features/analytics/queries/range';
import { VITAL_METRICS, vitals, type Site } from '../api/features/analytics/queries/site';
import { flagVariants, RESERVED_OUTCOMES } from '../api/features/analytics/queries/variants';
import { createAnalyticsWriter } from '../api/features/analytics/wiring';
import { hashTargetingKey, type EvaluationEvent, type EvaluationSource } from '../api/features/evaluation/recorder';
import { EvaluationWarehouse, type FlagScope } from '../api/features/insights/warehouse';
import { HEATMAP_BUCKET_MINUTES, rangeWindow, type RangeWindow } from '../api/features/insights/window';
import { createLogger } from '../api/infra/logger';
import { seededRandom } from '../api/features/experiments/allocation/random';

const EVALUATIONS = Number(process.env.BENCH_EVENTS ?? 10_000_000);
const BROWSER_EVENTS = Math.round(EVALUATIONS / 10);
const OUTCOMES = Math.round(EVALUATIONS / 10);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
/** How long the queries wait at most for background merges to finish after the ingest. */
const MERGE_WAIT_MS = 60_000;
/** Rows produced per event-loop turn at most, so the writer's serialization and inserts get turns. */
const SLICE = 10_000;
const BARS = { ingestPerSecond: 200_000, flagMetricsMs: 300, funnelMs: 1_000, rssGrowth: 1.25 };

const DAY_MS = 86_400_000;
const SPAN_MS = 30 * DAY_MS;
const PROJECT = 'prj_bench';
const WEB = 'svc_web';
const API = 'svc_api';
const USERS = 100_000;
const FLAGS = 200;
const FUNNEL_STEPS = ['view', 'add_to_cart', 'purchase'];

const random = seededRandom(12);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];

/** An index table for weighted picks: one array lookup per pick. */
function weightedTable<T>(entries: [T, number][], slots = 4_096): T[] {
  const total = entries.reduce((s, [, w]) => s + w, 0);
  const table: T[] = [];
  for (const [item, weight] of entries) for (let i = 0; i < Math.round((weight / total) * slots); i++) table.push(item);
  return table;
}

// ---------------------------------------------------------------------------------------------
// Flags and their outcome per user

type FlagKind = 'boolean' | 'string' | 'number' | 'object';
interface BenchFlag {
  key: string;
  kind: FlagKind;
  /** Served by rule-1 (when the user is inside its rollout) and rule-2. */
  ruleValues: [unknown, unknown];
  defaultValue: unknown;
  variants: { name: string; value: unknown }[];
  /** Percentage of rule-1's partial rollout; 100 when it has none. */
  rollout: number;
}

function benchFlags(): BenchFlag[] {
  return Array.from({ length: FLAGS }, (_, rank) => {
    const key = `flag-${String(rank).padStart(3, '0')}`;
    // The busiest flag is an experiment (string variants, a 20% ramp on its first rule), as are a third of the rest.
    const kind: FlagKind = rank === 0 || rank % 3 === 1 ? 'string' : rank % 20 === 7 ? 'number' : rank % 20 === 13 ? 'object' : 'boolean';
    const rollout = rank === 0 ? 20 : rank % 4 === 0 ? 50 : 100;
    switch (kind) {
      case 'string':
        return {
          key, kind, rollout,
          ruleValues: ['beta', 'internal'],
          defaultValue: 'control',
          variants: [{ name: 'control', value: 'control' }, { name: 'treatment-a', value: 'treatment-a' }, { name: 'treatment-b', value: 'treatment-b' }],
        };
      case 'number':
        return { key, kind, rollout, ruleValues: [50, 200], defaultValue: 100, variants: [] };
      case 'object':
        return { key, kind, rollout, ruleValues: [{ limit: 50, mode: 'strict' }, { limit: 500, mode: 'relaxed' }], defaultValue: { limit: 100, mode: 'normal' }, variants: [] };
      default:
        return { key, kind, rollout, ruleValues: [true, true], defaultValue: false, variants: [] };
    }
  });
}

type Outcome = Pick<EvaluationEvent, 'reason' | 'variant' | 'value' | 'ruleId' | 'rolloutSide'>;

/** Every outcome a flag can give, built once: events share them instead of allocating their own. */
interface FlagOutcomes {
  ruleOneIn: Outcome;
  ruleTwo: Outcome;
  /** Per fall-through choice (the variant, or the default): outside rule-1's rollout, and with no rule holding. */
  ruleOneOut: Outcome[];
  noRule: Outcome[];
}

function flagOutcomes(flag: BenchFlag): FlagOutcomes {
  const fallThrough: Omit<Outcome, 'ruleId' | 'rolloutSide'>[] = flag.variants.length
    ? flag.variants.map((v) => ({ reason: 'VARIANT', variant: v.name, value: v.value }))
    : [{ reason: 'DEFAULT', variant: undefined, value: flag.defaultValue }];
  return {
    ruleOneIn: { reason: 'TARGETING_MATCH', variant: undefined, value: flag.ruleValues[0], ruleId: 'rule-1', rolloutSide: flag.rollout < 100 ? 'in' : undefined },
    ruleTwo: { reason: 'TARGETING_MATCH', variant: undefined, value: flag.ruleValues[1], ruleId: 'rule-2', rolloutSide: undefined },
    ruleOneOut: fallThrough.map((o) => ({ ...o, ruleId: 'rule-1', rolloutSide: 'out' })),
    noRule: fallThrough.map((o) => ({ ...o, ruleId: undefined, rolloutSide: undefined })),
  };
}

/**
 * What a flag gives a user, stable per (flag, user) as the engine's rules and buckets are: 25%
 * of users hold rule-1 (served by it inside its rollout, falling through outside), 10% rule-2,
 * the rest fall through to the variants (by user) or the default.
 */
function outcomeOf(flag: BenchFlag, outcomes: FlagOutcomes, flagIndex: number, user: number): Outcome {
  const h = Math.imul(user + 1, 2_654_435_761) ^ Math.imul(flagIndex + 1, 40_503);
  const segment = (h >>> 0) % 100;
  if (segment < 25) return (h >>> 9) % 100 < flag.rollout ? outcomes.ruleOneIn : outcomes.ruleOneOut[user % outcomes.ruleOneOut.length];
  if (segment < 35) return outcomes.ruleTwo;
  return outcomes.noRule[user % outcomes.noRule.length];
}

// ---------------------------------------------------------------------------------------------
// Traffic generators: one row per call, timestamps in order over the 30 days before `nowMs`

const timeAt = (startMs: number, i: number, total: number) => startMs + Math.floor((i / total) * SPAN_MS);

/** Server latency in ms: mostly tens of microseconds, a 1% tail of a few ms. */
const latencyMs = () => {
  const base = 0.02 + -Math.log(1 - random()) * 0.04;
  return random() < 0.01 ? base * 40 : base;
};

function evaluationTraffic(flags: BenchFlag[], startMs: number, total: number): (i: number) => EvaluationEvent {
  const flagTable = weightedTable(flags.map((f, rank): [number, number] => [rank, 1 / (rank + 1)]), 16_384);
  const sources = weightedTable<EvaluationSource>([['rest', 55], ['ofrep', 30], ['connect', 10], ['grpc-web', 5]]);
  const users = Array.from({ length: USERS }, (_, u) => `user-${u}`);
  const outcomes = flags.map(flagOutcomes);
  // One request: a user, a service, an environment and 1-8 flags evaluated at one instant.
  let left = 0;
  let user = 0;
  let serviceId = WEB;
  let environment = 'production';
  let source: EvaluationSource = 'rest';
  return (i) => {
    if (left === 0) {
      left = 1 + Math.floor(random() * 8);
      user = Math.floor(random() * USERS);
      serviceId = random() < 0.6 ? WEB : API;
      environment = random() < 0.9 ? 'production' : 'staging';
      source = pick(sources);
    }
    left--;
    const flagIndex = flagTable[Math.floor(random() * flagTable.length)];
    const flag = flags[flagIndex];
    const failed = random() < 0.01;
    const o = failed ? undefined : outcomeOf(flag, outcomes[flagIndex], flagIndex, user);
    return {
      timestamp: timeAt(startMs, i, total),
      projectId: PROJECT,
      serviceId,
      environment,
      flagKey: flag.key,
      reason: o ? o.reason : 'ERROR',
      variant: o?.variant,
      value: o ? o.value : flag.defaultValue,
      latencyMs: latencyMs(),
      errorCode: o ? undefined : random() < 0.7 ? 'TYPE_MISMATCH' : 'FLAG_NOT_FOUND',
      ruleId: o?.ruleId,
      rolloutSide: o?.rolloutSide,
      targetingKey: users[user],
      source,
    };
  };
}

/** The flag values a client of `user` holds (JSON text), for outcome and browser `flags`. */
function clientFlags(flags: BenchFlag[], user: number, count: number): Record<string, string> {
  const held: Record<string, string> = {};
  for (let f = 0; f < count; f++) held[flags[f].key] = JSON.stringify(outcomeOf(flags[f], flagOutcomes(flags[f]), f, user).value);
  return held;
}

const VITALS: { name: (typeof VITAL_METRICS)[number]; median: number; good: number; poor: number }[] = [
  { name: 'lcp', median: 2_200, good: 2_500, poor: 4_000 },
  { name: 'cls', median: 0.05, good: 0.1, poor: 0.25 },
  { name: 'inp', median: 150, good: 200, poor: 500 },
  { name: 'ttfb', median: 500, good: 800, poor: 1_800 },
  { name: 'fcp', median: 1_500, good: 1_800, poor: 3_000 },
];
const PAGES = ['/', '/search', '/cart', '/checkout', '/account', ...Array.from({ length: 20 }, (_, i) => `/p/product-${i}`)];
const ERRORS = Array.from({ length: 12 }, (_, i) => ({ message: `TypeError: cannot read properties of undefined (reading 'item${i}')`, stack: `at render (app.${i}.js:${10 + i}:${5 * i})\nat commit (react-dom.js:1:2)` }));

function browserTraffic(flags: BenchFlag[], startMs: number, total: number): (i: number) => BrowserEventRow {
  const types = weightedTable<BrowserEventType>([['pageview', 35], ['webvital', 35], ['click', 18], ['scroll', 6], ['custom', 4], ['error', 2]]);
  const devices = weightedTable<[string, string, string]>([[['Chrome', 'Windows', 'desktop'], 40], [['Safari', 'iOS', 'mobile'], 25], [['Chrome', 'Android', 'mobile'], 20], [['Firefox', 'Linux', 'desktop'], 5], [['Safari', 'macOS', 'desktop'], 10]]);
  const countries = ['US', 'US', 'US', 'DE', 'FR', 'GB', 'IN', 'BR', 'JP', ''];
  // A session: one visitor, about 10 events.
  let left = 0;
  let sessionId = '';
  let visitorHash = '';
  let held: Record<string, string> = {};
  let device = devices[0];
  let country = '';
  let url = '';
  return (i) => {
    if (left === 0) {
      left = 1 + Math.floor(random() * 20);
      const user = Math.floor(random() * USERS);
      sessionId = randomUUID();
      visitorHash = random() < 0.8 ? hashTargetingKey(`user-${user}`) : '';
      held = clientFlags(flags, user, 3);
      device = pick(devices);
      country = pick(countries);
      url = `https://shop.example.com${pick(PAGES)}`;
    }
    left--;
    const type = pick(types);
    const timestamp = timeAt(startMs, i, total);
    let name = '';
    let value: number | null = null;
    let data = '{}';
    if (type === 'pageview') url = `https://shop.example.com${pick(PAGES)}`;
    if (type === 'webvital') {
      const vital = pick(VITALS);
      value = vital.median * Math.exp((random() - 0.5) * 1.6);
      name = vital.name.toUpperCase();
      data = JSON.stringify({ rating: value <= vital.good ? 'good' : value <= vital.poor ? 'needs-improvement' : 'poor' });
    } else if (type === 'error') {
      data = JSON.stringify(pick(ERRORS));
    } else if (type === 'custom') {
      name = 'newsletter_signup';
      value = 1;
    } else if (type === 'click') {
      data = JSON.stringify({ target: pick(['buy-button', 'nav-search', 'add-to-cart', 'footer-link']) });
    }
    return {
      timestamp, receivedAt: timestamp + 40, projectId: PROJECT, serviceId: WEB, type, url, referrer: type === 'pageview' && random() < 0.3 ? 'https://www.google.com/' : '',
      sessionId, visitorHash, name, value, flags: held, data, country, browser: device[0], os: device[1], device: device[2], eventId: randomUUID(),
    };
  };
}

function outcomeTraffic(flags: BenchFlag[], startMs: number, endMs: number, total: number): (i: number) => OutcomeRow {
  const users = Array.from({ length: USERS }, (_, u) => hashTargetingKey(`user-${u}`));
  // A visit: a view, maybe a cart 1-3 minutes later and a purchase after it; beside them SDK errors and latency samples.
  const queue: Omit<OutcomeRow, 'eventId'>[] = [];
  return (i) => {
    if (queue.length === 0) {
      const user = Math.floor(random() * USERS);
      const at = timeAt(startMs, i, total);
      const serviceId = random() < 0.7 ? WEB : API;
      const held = random() < 0.3 ? clientFlags(flags, user, 2) : {};
      const event = (name: string, offsetMs: number, value: number | null, origin: OutcomeRow['origin'] = 'track') => ({
        timestamp: Math.min(at + offsetMs, endMs - 1), projectId: PROJECT, serviceId, environment: 'production', event: name,
        targetingKeyHash: users[user], value, flags: held, origin,
      });
      const roll = random();
      if (roll < 0.12) queue.push(event('error', 0, null, 'sdk-telemetry'));
      else if (roll < 0.22) queue.push(event('latency', 0, 20 + -Math.log(1 - random()) * 80));
      else if (roll < 0.26) queue.push(event('signup', 0, null));
      else {
        queue.push(event('view', 0, null));
        if (random() < 0.35) {
          queue.push(event('add_to_cart', Math.round(60_000 + random() * 120_000), null));
          if (random() < 0.4) queue.push(event('purchase', Math.round(240_000 + random() * 300_000), Math.round(500 + random() * 15_000) / 100));
        }
      }
    }
    return { ...queue.shift()!, eventId: randomUUID() };
  };
}

// ---------------------------------------------------------------------------------------------
// Ingest

interface IngestResult {
  table: string;
  rows: number;
  seconds: number;
  dropped: number;
  failedBatches: number;
}

const rssMb = () => Math.round(process.memoryUsage().rss / 1e6);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/** RSS samples every 500 ms, to see whether memory levels off. */
class RssSampler {
  readonly samples: { at: number; rss: number }[] = [];
  private readonly timer = setInterval(() => this.samples.push({ at: performance.now(), rss: rssMb() }), 500);
  peakBetween(fromMs: number, toMs: number): number {
    return Math.max(0, ...this.samples.filter((s) => s.at >= fromMs && s.at < toMs).map((s) => s.rss));
  }
  stop() {
    clearInterval(this.timer);
  }
}

/**
 * Produces `total` rows into one table as fast as the writer's memory bound admits them (the
 * writer is the bottleneck, nothing is refused), then flushes: rows/s until the last row is written.
 */
async function ingest<R>(
  table: string,
  total: number,
  next: (i: number) => R,
  record: (row: R) => boolean,
  stats: () => TableWriterStats,
  maxBuffered: number,
  flush: () => Promise<void>,
): Promise<IngestResult> {
  const started = performance.now();
  let produced = 0;
  let lastReport = started;
  while (produced < total) {
    const s = stats();
    const room = Math.min(maxBuffered - s.buffered - s.inFlight, SLICE, total - produced);
    if (room <= 0) {
      await sleep(1);
      continue;
    }
    for (let k = 0; k < room; k++) record(next(produced++));
    await new Promise((r) => setImmediate(r));
    if (performance.now() - lastReport > 10_000) {
      lastReport = performance.now();
      console.log(`  ${table}: ${fmt(stats().written)} written, ${fmt((stats().written * 1000) / (lastReport - started))}/s, rss ${rssMb()} MB`);
    }
  }
  await flush();
  const s = stats();
  return { table, rows: s.written, seconds: (performance.now() - started) / 1000, dropped: s.dropped, failedBatches: s.failedBatches };
}

/** Waits (bounded) until ClickHouse runs no merge, so the queries do not compete with them. */
async function settleMerges(analytics: Analytics): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < MERGE_WAIT_MS) {
    const [row] = await selectRows<{ n: string }>(analytics, 'SELECT count() AS n FROM system.merges', {});
    if (Number(row.n) === 0) break;
    await sleep(500);
  }
  return (performance.now() - started) / 1000;
}

// ---------------------------------------------------------------------------------------------
// Queries: the modules' own functions, and the same questions on the raw tables

interface Timing {
  medianMs: number;
  maxMs: number;
}

async function timed<T>(run: () => Promise<T>): Promise<{ timing: Timing; result: T }> {
  const result = await run(); // warm-up
  const runs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await run();
    runs.push(performance.now() - t0);
  }
  runs.sort((a, b) => a - b);
  return { timing: { medianMs: runs[Math.floor((runs.length - 1) / 2)], maxMs: runs[runs.length - 1] }, result };
}

interface QueryCase {
  name: string;
  /** The answer's counts, compared between the two sides (quantiles are estimates and differ). */
  rollup: () => Promise<unknown>;
  raw?: () => Promise<unknown>;
}

const FLAG_FILTER = 'project_id = {projectId:String} AND service_id = {serviceId:String} AND environment = {environment:String} AND flag_key = {flagKey:String}';
const RAW_IN_MINUTES = 'timestamp >= fromUnixTimestamp64Milli({startMs:Int64}) AND timestamp < fromUnixTimestamp64Milli({endMs:Int64})';
const minuteParams = (w: RangeWindow) => ({ startMs: w.startMs, endMs: w.endMs, startS: w.startMs / 1000, bucketS: w.bucketMinutes * 60 });
/** A raw row's bucket as evaluation_minutes' readers compute it from `minute`. */
const RAW_BUCKET = 'toUInt32(toDateTime(timestamp)) - (toUInt32(toDateTime(timestamp)) - {startS:UInt32}) % {bucketS:UInt32}';

/** Flag metrics' ClickHouse reads, as InsightsService.metrics runs them (at once); counts of the answer. */
async function flagMetricsFromRollup(warehouse: EvaluationWarehouse, scope: FlagScope, w: RangeWindow, nowMs: number) {
  const [series, breakdowns, realtime] = await Promise.all([warehouse.flagSeries(scope, w, w.bucketMinutes), warehouse.flagBreakdowns(scope, w), warehouse.flagRealtime(scope, nowMs, w.startMs)]);
  return {
    evaluations: series.total.evaluations,
    // Application errors are read raw on both sides (the one outcome query); failed evaluations come from the rollup.
    evaluationErrors: series.total.evaluationErrors,
    // A bucket may hold outcomes only (users evaluated earlier in the range).
    buckets: [...series.buckets].filter(([, s]) => s.evaluations > 0).map(([at, s]) => `${at}:${s.evaluations}`).sort(),
    ...breakdowns,
    lastMinute: realtime.lastMinute,
  };
}

/** The same answer from evaluation_events: totals and series, reasons and values, and the realtime read (raw on both sides). */
async function flagMetricsFromRaw(analytics: Analytics, warehouse: EvaluationWarehouse, scope: FlagScope, w: RangeWindow, nowMs: number) {
  const params = { ...scope, ...minuteParams(w) };
  const [series, breakdown, realtime] = await Promise.all([
    selectRows<{ bucket: string; n: string; e: string; l: number; q: number[] }>(
      analytics,
      `SELECT ${RAW_BUCKET} AS bucket, count() AS n, countIf(error_code != '') AS e, sum(toFloat64(latency_ms)) AS l,
              quantilesTDigest(0.5, 0.95, 0.99)(latency_ms) AS q
       FROM evaluation_events WHERE ${FLAG_FILTER} AND ${RAW_IN_MINUTES}
       GROUP BY GROUPING SETS ((bucket), ())`,
      params,
    ),
    selectRows<{ reason: string; v: string; n: string; by_value: number }>(
      analytics,
      `SELECT reason, left(value, 128) AS v, count() AS n, grouping(reason) AS by_value
       FROM evaluation_events WHERE ${FLAG_FILTER} AND ${RAW_IN_MINUTES}
       GROUP BY GROUPING SETS ((reason), (v)) ORDER BY n DESC, reason, v LIMIT 100 BY by_value`,
      params,
    ),
    warehouse.flagRealtime(scope, nowMs, w.startMs),
  ]);
  const total = series.find((r) => Number(r.bucket) === 0);
  const reasons: Record<string, number> = {};
  const values: Record<string, number> = {};
  for (const r of breakdown) {
    if (Number(r.by_value)) values[r.v] = Number(r.n);
    else reasons[r.reason] = Number(r.n);
  }
  return {
    evaluations: Number(total?.n ?? 0),
    evaluationErrors: Number(total?.e ?? 0),
    buckets: series.filter((r) => Number(r.bucket) !== 0).map((r) => `${Number(r.bucket) * 1000}:${Number(r.n)}`).sort(),
    reasons,
    values,
    lastMinute: realtime.lastMinute,
  };
}

async function heatmapFromRollup(warehouse: EvaluationWarehouse, w: RangeWindow) {
  const cells = await warehouse.heatmapCells({ projectId: PROJECT }, w, w.bucketMinutes);
  return cellCounts(cells.map((c) => [c.serviceId, c.flagKey, c.bucketMs / 1000, c.evaluations]));
}

async function heatmapFromRaw(analytics: Analytics, w: RangeWindow) {
  const rows = await selectRows<{ service_id: string; flag_key: string; bucket: string; n: string }>(
    analytics,
    `SELECT service_id, flag_key, ${RAW_BUCKET} AS bucket, count() AS n FROM evaluation_events
     WHERE project_id = {projectId:String} AND ${RAW_IN_MINUTES} GROUP BY service_id, flag_key, bucket`,
    { projectId: PROJECT, ...minuteParams(w) },
  );
  return cellCounts(rows.map((r) => [r.service_id, r.flag_key, Number(r.bucket), Number(r.n)]));
}

/** Cells as a sorted list, so both sides compare whatever order ClickHouse returned them in. */
const cellCounts = (cells: [string, string, number, number][]) => ({ cells: cells.length, evaluations: cells.reduce((s, c) => s + c[3], 0), sorted: cells.map((c) => c.join('/')).sort().join(',') });

async function vitalsFromRollup(analytics: Analytics, site: Site, range: RangeName, nowMs: number) {
  const answer = await vitals(analytics, site, windowOf(range, nowMs));
  return { totals: answer.vitals.map((v) => `${v.metric}:${v.count}`), series: answer.timeSeries.map((p) => `${p.timestamp}/${p.metric}:${p.count}`) };
}

/** vitals() without flagKey, on web_vitals instead of web_vital_minutes. */
async function vitalsFromRaw(analytics: Analytics, site: Site, range: RangeName, nowMs: number) {
  const w = windowOf(range, nowMs);
  const params = { projectId: site.projectId, siteId: site.siteId, ...windowParams(w), metrics: [...VITAL_METRICS] };
  const select = (grouping: string, extra: string) =>
    `SELECT name, ${extra} count() AS samples, quantilesTDigest(0.5, 0.75, 0.95)(value) AS q FROM web_vitals
     WHERE project_id = {projectId:String} AND service_id = {siteId:String} AND ${rawInWindow('timestamp')} AND name IN {metrics:Array(String)}
     GROUP BY ${grouping}`;
  type Row = { name: string; bucket?: number; samples: string };
  const [totals, series] = await Promise.all([
    selectRows<Row>(analytics, select('name', ''), params),
    selectRows<Row>(analytics, `${select('name, bucket', `${bucketOf('timestamp')} AS bucket,`)} ORDER BY bucket, name`, params),
  ]);
  return {
    totals: VITAL_METRICS.map((metric) => `${metric}:${Number(totals.find((r) => r.name === metric)?.samples ?? 0)}`),
    series: series.map((r) => `${new Date(Number(r.bucket) * 1000).toISOString()}/${r.name}:${Number(r.samples)}`),
  };
}

async function variantsFromRollup(analytics: Analytics, scope: OutcomeScope, range: RangeName, nowMs: number) {
  const report = await flagVariants(analytics, scope, windowOf(range, nowMs));
  return report.variants.map((v) => `${v.variant}:${v.evaluations}/${v.conversions}`).sort();
}

/** flagVariants' evaluations part on evaluation_events; its conversions part is raw already (the same text). */
async function variantsFromRaw(analytics: Analytics, scope: OutcomeScope, range: RangeName, nowMs: number) {
  const w = windowOf(range, nowMs);
  const params = { ...scopeParams(scope, w), reserved: [...RESERVED_OUTCOMES] };
  const [evaluated, converted] = await Promise.all([
    selectRows<{ v: string; n: string }>(
      analytics,
      `SELECT left(value, 128) AS v, count() AS n, quantilesTDigest(0.5, 0.95, 0.99)(latency_ms) AS q
       FROM evaluation_events WHERE ${scopeCondition(scope)} AND flag_key = {flagKey:String} GROUP BY v`,
      params,
    ),
    selectRows<{ variant_value: string; conversions: string }>(
      analytics,
      `WITH ${lastValuesCte(scope)}
       SELECT ${ATTRIBUTED_VALUE} AS variant_value, count() AS conversions, avgOrNull(o.value) AS avg_value
       FROM outcome_events AS o ${JOIN_LAST_VALUES}
       WHERE ${scopeCondition(scope, 'o')} AND o.event NOT IN {reserved:Array(String)}
       GROUP BY variant_value HAVING variant_value != ''`,
      params,
    ),
  ]);
  const byValue = new Map<string, [number, number]>();
  for (const r of evaluated) byValue.set(variantLabel(r.v), [Number(r.n), 0]);
  for (const r of converted) byValue.set(variantLabel(r.variant_value), [byValue.get(variantLabel(r.variant_value))?.[0] ?? 0, Number(r.conversions)]);
  return [...byValue].map(([variant, [evaluations, conversions]]) => `${variant}:${evaluations}/${conversions}`).sort();
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const benchStarted = performance.now();
  const nowMs = Date.now();
  const startMs = nowMs - SPAN_MS;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-analytics-bench-'));
  const rss = new RssSampler();
  const rssAtStart = rssMb();
  const analytics = await openAnalytics({ database: `analytics_bench_${process.pid}`, chdbPath: path.join(dir, 'chdb') });
  try {
    await migrateAnalytics(analytics);
    const config = parseConfig(process.env);
    const { writer, evaluations } = createAnalyticsWriter({ config, analytics, logger: createLogger('warn'), instanceId: 'bench' });
    const rssBefore = rssMb();
    const flags = benchFlags();
    console.log(
      `ingesting ${fmt(EVALUATIONS)} evaluation, ${fmt(BROWSER_EVENTS)} browser and ${fmt(OUTCOMES)} outcome events through the analytics writer ` +
        `(evaluations: batches of ${fmt(config.EVAL_EVENTS_BATCH_SIZE)}, at most ${fmt(config.EVAL_EVENTS_MAX_BUFFERED)} held; other tables: ${fmt(config.ANALYTICS_BATCH_SIZE)}, ${fmt(config.ANALYTICS_MAX_BUFFERED)})`,
    );

    const flushAll = () => writer.flush();
    const tableStats = (table: string) => () => writer.stats()[table];
    const evalStarted = performance.now();
    const ingested = [await ingest('evaluation_events', EVALUATIONS, evaluationTraffic(flags, startMs, EVALUATIONS), (e) => evaluations.record(e), () => evaluations.stats(), config.EVAL_EVENTS_MAX_BUFFERED, flushAll)];
    const evalEnded = performance.now();
    ingested.push(await ingest('browser_events', BROWSER_EVENTS, browserTraffic(flags, startMs, BROWSER_EVENTS), (r) => writer.record('browser_events', r), tableStats('browser_events'), config.ANALYTICS_MAX_BUFFERED, flushAll));
    ingested.push(await ingest('outcome_events', OUTCOMES, outcomeTraffic(flags, startMs, nowMs, OUTCOMES), (r) => writer.record('outcome_events', r), tableStats('outcome_events'), config.ANALYTICS_MAX_BUFFERED, flushAll));
    await writer.close();
    const rssAfterIngest = rssMb();
    // Memory levels off: the peak of the evaluation ingest's second half against its first half's.
    const evalMid = (evalStarted + evalEnded) / 2;
    const firstHalfPeak = rss.peakBetween(evalStarted, evalMid);
    const secondHalfPeak = rss.peakBetween(evalMid, evalEnded);
    const ingestPeak = rss.peakBetween(evalStarted, performance.now());

    const counts = await selectRows<{ t: string; n: string }>(
      analytics,
      `SELECT 'evaluation_events' AS t, count() AS n FROM evaluation_events UNION ALL SELECT 'evaluation_minutes', sum(evaluations) FROM evaluation_minutes
       UNION ALL SELECT 'browser_events', count() FROM browser_events UNION ALL SELECT 'web_vitals', count() FROM web_vitals
       UNION ALL SELECT 'outcome_events', count() FROM outcome_events`,
      {},
    );
    const mergeWait = await settleMerges(analytics);
    const parts = await selectRows<{ table: string; parts: string; table_rows: string }>(
      analytics,
      `SELECT table, count() AS parts, sum(rows) AS table_rows FROM system.parts WHERE database = currentDatabase() AND active AND rows > 0 GROUP BY table ORDER BY table`,
      {},
    );
    console.log(`\nrows in ClickHouse: ${counts.map((c) => `${c.t} ${fmt(Number(c.n))}`).join(', ')}`);
    console.log(`active parts after ${mergeWait.toFixed(0)} s of waiting for merges: ${parts.map((p) => `${p.table} ${p.parts} (${fmt(Number(p.table_rows))} rows)`).join(', ')}`);

    const warehouse = new EvaluationWarehouse(analytics);
    const busiest = flags[0].key;
    const scope: FlagScope = { projectId: PROJECT, serviceId: WEB, environment: 'production', flagKey: busiest };
    const outcomeScope: OutcomeScope = { projectId: PROJECT, environment: 'production', flagKey: busiest };
    const site: Site = { projectId: PROJECT, siteId: WEB };
    const metricsWindow = (range: '24h' | '30d') => rangeWindow(range, nowMs);
    const heatmapWindow = rangeWindow('7d', nowMs, HEATMAP_BUCKET_MINUTES['7d']);
    const cases: QueryCase[] = [
      ...(['24h', '30d'] as const).map((range) => ({
        name: `flag metrics ${range}`,
        rollup: () => flagMetricsFromRollup(warehouse, scope, metricsWindow(range), nowMs),
        raw: () => flagMetricsFromRaw(analytics, warehouse, scope, metricsWindow(range), nowMs),
      })),
      { name: 'vitals 30d', rollup: () => vitalsFromRollup(analytics, site, '30d', nowMs), raw: () => vitalsFromRaw(analytics, site, '30d', nowMs) },
      ...(['24h', '30d'] as const).map((range) => ({
        name: `flag variants ${range}`,
        rollup: () => variantsFromRollup(analytics, outcomeScope, range, nowMs),
        raw: () => variantsFromRaw(analytics, outcomeScope, range, nowMs),
      })),
      ...(['24h', '30d'] as const).map((range) => ({
        name: `funnel ${range} (${FUNNEL_STEPS.join(' -> ')})`,
        rollup: () => flagFunnel(analytics, outcomeScope, windowOf(range, nowMs), FUNNEL_STEPS),
      })),
      { name: 'evaluation heatmap 7d', rollup: () => heatmapFromRollup(warehouse, heatmapWindow), raw: () => heatmapFromRaw(analytics, heatmapWindow) },
    ];
    const measured: { name: string; rollup: Timing; raw?: Timing; same?: boolean }[] = [];
    for (const c of cases) {
      const rollup = await timed(c.rollup);
      const raw = c.raw ? await timed(c.raw) : undefined;
      const same = raw ? JSON.stringify(rollup.result) === JSON.stringify(raw.result) : undefined;
      if (same === false) console.log(`${c.name}: the answers differ\n  rollup ${JSON.stringify(rollup.result).slice(0, 2_000)}\n  raw    ${JSON.stringify(raw!.result).slice(0, 2_000)}`);
      measured.push({ name: c.name, rollup: rollup.timing, raw: raw?.timing, same });
      console.log(`  ${c.name}: ${Math.round(rollup.timing.medianMs)} ms${raw ? ` (raw ${Math.round(raw.timing.medianMs)} ms)` : ''}`);
    }
    rss.stop();
    const rssEnd = rssMb();

    // Live ingest: the same traffic stamped with its arrival time, into a database of its own (the
    // queries above keep their 30-day history). At 200,000 events/s the events of a minute fill
    // one rollup row per flag and value, as in production; the 30-day backfill above writes
    // nearly a rollup row per event, the writer's worst case.
    console.log('\nlive ingest (timestamps = arrival time) into a database of its own ...');
    const live = await openAnalytics({ database: `analytics_bench_live_${process.pid}`, chdbPath: path.join(dir, 'chdb') });
    let liveIngested: IngestResult[];
    let liveSeconds = 0;
    try {
      await migrateAnalytics(live);
      const liveWriter = createAnalyticsWriter({ config, analytics: live, logger: createLogger('warn'), instanceId: 'bench-live' });
      const stampNow = <R extends { timestamp: number }>(next: (i: number) => R) => (i: number): R => {
        const row = next(i);
        row.timestamp = Date.now();
        return row;
      };
      const liveFlush = () => liveWriter.writer.flush();
      // All producers at once, as a running service has them (each table's writer inserts on its own).
      const liveStarted = performance.now();
      liveIngested = await Promise.all([
        ingest('evaluation_events', EVALUATIONS, stampNow(evaluationTraffic(flags, startMs, EVALUATIONS)), (e) => liveWriter.evaluations.record(e), () => liveWriter.evaluations.stats(), config.EVAL_EVENTS_MAX_BUFFERED, liveFlush),
        ingest('browser_events', BROWSER_EVENTS, stampNow(browserTraffic(flags, startMs, BROWSER_EVENTS)), (r) => liveWriter.writer.record('browser_events', r), () => liveWriter.writer.stats().browser_events, config.ANALYTICS_MAX_BUFFERED, liveFlush),
        ingest('outcome_events', OUTCOMES, stampNow(outcomeTraffic(flags, startMs, nowMs, OUTCOMES)), (r) => liveWriter.writer.record('outcome_events', r), () => liveWriter.writer.stats().outcome_events, config.ANALYTICS_MAX_BUFFERED, liveFlush),
      ]);
      liveSeconds = (performance.now() - liveStarted) / 1000;
      await liveWriter.writer.close();
    } finally {
      await live.close();
    }

    const rate = (results: IngestResult[]) => results.reduce((s, r) => s + r.rows, 0) / results.reduce((s, r) => s + r.seconds, 0);
    // The live tables were produced side by side: their overall rate is all rows over the wall time.
    const overall = liveIngested.reduce((s, r) => s + r.rows, 0) / liveSeconds;
    const backfill = rate(ingested);
    const ms = (n: number | undefined) => (n === undefined ? '-' : `${Math.round(n)}`);
    console.log(`\n## Ingest (chDB in-process, through the analytics writer)\n`);
    console.log('| traffic | table | rows | seconds | rows/s | dropped | failed batches |\n|---|---|---|---|---|---|---|');
    for (const [traffic, results, seconds] of [['live, tables side by side', liveIngested, liveSeconds], ['30-day backfill, one table after another', ingested, undefined]] as const) {
      for (const r of results) console.log(`| ${traffic} | ${r.table} | ${fmt(r.rows)} | ${r.seconds.toFixed(1)} | ${fmt(r.rows / r.seconds)} | ${r.dropped} | ${r.failedBatches} |`);
      const rows = results.reduce((s, r) => s + r.rows, 0);
      const total = seconds ?? results.reduce((s, r) => s + r.seconds, 0);
      console.log(`| ${traffic} | overall | ${fmt(rows)} | ${total.toFixed(1)} | ${fmt(rows / total)} | | |`);
    }
    console.log(
      `\nRSS: ${rssAtStart} MB at start, ${rssBefore} MB with chDB open and migrated, peak ${ingestPeak} MB during the ingest ` +
        `(evaluations: first half peak ${firstHalfPeak} MB, second half ${secondHalfPeak} MB), ${rssAfterIngest} MB after it, ${rssEnd} MB after the queries`,
    );
    console.log(`\n## Queries (median and max of ${RUNS} runs after one warm-up; busiest flag ${busiest}, ${fmt(Number(counts.find((c) => c.t === 'evaluation_events')?.n))} evaluation events)\n`);
    console.log('| query | rollup median ms | max | raw median ms | max | rollup gain | same counts |\n|---|---|---|---|---|---|---|');
    for (const m of measured) {
      const gain = m.raw ? `${(m.raw.medianMs / m.rollup.medianMs).toFixed(1)}x` : 'no rollup (raw tables)';
      console.log(`| ${m.name} | ${ms(m.rollup.medianMs)} | ${ms(m.rollup.maxMs)} | ${ms(m.raw?.medianMs)} | ${ms(m.raw?.maxMs)} | ${gain} | ${m.same === undefined ? '-' : m.same ? 'yes' : 'NO'} |`);
    }
    const named = (prefix: string) => measured.filter((m) => m.name.startsWith(prefix));
    const bars: [string, string, boolean][] = [
      [`live ingest >= ${fmt(BARS.ingestPerSecond)} events/s overall`, `${fmt(overall)}/s`, overall >= BARS.ingestPerSecond && liveIngested.every((r) => r.dropped === 0 && r.failedBatches === 0)],
      [`30-day backfill ingest (reported; every event its own rollup row)`, `${fmt(backfill)}/s`, ingested.every((r) => r.dropped === 0 && r.failedBatches === 0)],
      [`RSS levels off: second half of the evaluation ingest <= ${BARS.rssGrowth}x the first half's peak`, `${firstHalfPeak} -> ${secondHalfPeak} MB`, secondHalfPeak <= firstHalfPeak * BARS.rssGrowth],
      ...named('flag metrics').map((m): [string, string, boolean] => [`${m.name} < ${BARS.flagMetricsMs} ms (median)`, `${ms(m.rollup.medianMs)} ms (max ${ms(m.rollup.maxMs)})`, m.rollup.medianMs < BARS.flagMetricsMs]),
      ...named('funnel').map((m): [string, string, boolean] => [`${m.name} < ${BARS.funnelMs} ms (median)`, `${ms(m.rollup.medianMs)} ms (max ${ms(m.rollup.maxMs)})`, m.rollup.medianMs < BARS.funnelMs]),
      ['rollup and raw answers count the same', `${measured.filter((m) => m.same).length}/${measured.filter((m) => m.same !== undefined).length}`, measured.every((m) => m.same !== false)],
    ];
    console.log('\n| bar | measured | met |\n|---|---|---|');
    for (const [bar, value, met] of bars) console.log(`| ${bar} | ${value} | ${met ? 'yes' : 'NO'} |`);
    const [load1, load5] = os.loadavg().map((n) => n.toFixed(1));
    console.log(`\n(${os.cpus().length} cores shared with whatever else runs: load average ${load1} (1 min), ${load5} (5 min) at the end; total bench ${Math.round((performance.now() - benchStarted) / 1000)} s)`);
  } finally {
    rss.stop();
    await analytics.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
