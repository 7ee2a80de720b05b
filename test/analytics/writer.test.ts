import { openAnalytics, type Analytics } from '../../analytics/client';
import { migrateAnalytics } from '../../analytics/migrate';
import type { AnalyticsRows, BrowserEventRow, OutcomeRow } from '../../analytics/rows';
import { AnalyticsWriter, TableWriter, ROW_FORMATS, type TableWriterOptions } from '../../analytics/writer';
import { createLogger } from '../../api/infra/logger';
import type { EvaluationResult } from '../../api/features/evaluation/engine/index';
import { EvaluationRecorder } from '../../api/features/evaluation/recorder';
import { eventually } from '../support/harness';
import { workerChdbPath } from '../support/chdb-path';

/**
 * The batched analytics writer against chDB (the embedded profile's store): every table's rows
 * land exactly (TabSeparated escaping, Map columns, NULLs, milliseconds), the memory bound
 * refuses instead of losing, and a batch retried after ClickHouse stored it counts once in the
 * raw table and in every rollup its views feed.
 */

const logger = createLogger('silent');
const AWKWARD = "tab\there, newline\nthere, back\\slash, 'quote', {braces}:, NUL\0, é 日本";
const T0 = Date.UTC(2026, 10, 23, 12, 30, 15, 7);

let analytics: Analytics;
let counter = 0;

beforeAll(async () => {
  analytics = await openAnalytics({ database: `writer_${process.pid}`, chdbPath: workerChdbPath() });
  await migrateAnalytics(analytics);
});

afterAll(async () => {
  await analytics.client.command({ query: `DROP DATABASE IF EXISTS writer_${process.pid}` }).catch(() => undefined);
  await analytics.close();
});

/** A project id no other test of this file writes, so counts are this test's alone. */
const freshProject = () => `prj_w${++counter}_${Date.now()}`;

function options(overrides: Partial<TableWriterOptions> = {}): TableWriterOptions {
  return { analytics, logger, batchSize: 1_000, flushIntervalMs: 60_000, maxBuffered: 10_000, maxAttempts: 3, retryBaseMs: 1, ...overrides };
}

async function rows<T = Record<string, unknown>>(query: string, params: Record<string, unknown>): Promise<T[]> {
  const rs = await analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
  return (await rs.json()) as T[];
}

async function count(query: string, projectId: string): Promise<number> {
  const [row] = await rows<{ n: string | number }>(query, { projectId });
  return Number(row.n);
}

/**
 * The store as a flaky network makes it: the insert is performed, then its answer is lost
 * (`failures` times), so the writer must try again a batch ClickHouse already has.
 */
function answerLostAfterInsert(failures: number): { analytics: Analytics; inserts: () => number; tokens: string[] } {
  let left = failures;
  let inserts = 0;
  const tokens: string[] = [];
  const insertTabSeparated: Analytics['insertTabSeparated'] = async (insert) => {
    inserts++;
    tokens.push(String(insert.settings.insert_deduplication_token));
    await analytics.insertTabSeparated(insert);
    if (left > 0) {
      left--;
      throw new Error('socket hang up (after the server stored the rows)');
    }
  };
  return { analytics: { ...analytics, insertTabSeparated }, inserts: () => inserts, tokens };
}

function outcome(projectId: string, i: number, overrides: Partial<OutcomeRow> = {}): OutcomeRow {
  return {
    timestamp: T0 + i,
    projectId,
    serviceId: 'svc_w',
    environment: 'production',
    event: 'purchase',
    targetingKeyHash: `h${i % 4}`,
    value: i % 2 === 0 ? i : null,
    flags: { checkout: 'true' },
    origin: 'track',
    eventId: `e${i}`,
    ...overrides,
  };
}

function browserEvent(projectId: string, i: number, overrides: Partial<BrowserEventRow>): BrowserEventRow {
  return {
    timestamp: T0 + i,
    receivedAt: T0 + i + 5,
    projectId,
    serviceId: 'site_w',
    type: 'pageview',
    url: 'https://example.test/p',
    referrer: '',
    sessionId: `s${i % 3}`,
    visitorHash: `v${i % 5}`,
    name: '',
    value: null,
    flags: {},
    data: '{}',
    country: '',
    browser: 'Firefox',
    os: 'Linux',
    device: 'desktop',
    eventId: `b${i}`,
    ...overrides,
  };
}

describe('AnalyticsWriter into chDB', () => {
  it('stores every table of analytics/rows.ts exactly: escaping, Map columns, NULL, millisecond timestamps', async () => {
    const projectId = freshProject();
    const writer = new AnalyticsWriter(options());
    const flags = { [AWKWARD]: JSON.stringify({ v: AWKWARD }), plain: 'true', '': '' };
    const recentlySeen = Date.now();
    const samples: { [T in keyof AnalyticsRows]: AnalyticsRows[T] } = {
      outcome_events: outcome(projectId, 1, { event: 'signup', targetingKeyHash: AWKWARD, value: null, flags, eventId: AWKWARD }),
      sdk_telemetry: {
        timestamp: T0, projectId, serviceId: 'svc_w', environment: 'staging', flagKey: AWKWARD, variant: AWKWARD,
        evaluations: 12_345_678_901, cacheHits: 7, cacheMisses: 0, avgLatencyMs: 0.125, eventId: 't1',
      },
      sdk_diagnostics: {
        timestamp: T0, projectId, serviceId: 'svc_w', environment: 'staging', totalEvaluations: 100, cacheHits: 90,
        cacheHitRatio: 0.9, trackedFlags: 3, eventId: 'd1',
      },
      web_vitals: {
        timestamp: T0, projectId, serviceId: 'svc_w', environment: 'production', origin: 'sdk', name: 'lcp', value: 2512.5,
        rating: 'needs-improvement', activeFlags: flags, sessionId: AWKWARD, url: AWKWARD, eventId: 'v1',
      },
      client_errors: {
        timestamp: T0, projectId, serviceId: 'svc_w', environment: 'production', origin: 'sdk', fingerprint: 'f1',
        message: AWKWARD, stack: `${AWKWARD}\n  at x`, activeFlags: {}, sessionId: '', url: '', eventId: 'c1',
      },
      browser_events: browserEvent(projectId, 0, { type: 'custom', name: 'cta', value: -1.5, referrer: AWKWARD, flags, data: JSON.stringify({ note: AWKWARD }) }),
      admin_events: {
        occurredAt: T0, receivedAt: T0 + 1, siteId: 'svc_admin_dev', source: 'console', sessionId: 's', installId: 'i',
        userHash: 'u', event: 'flag_viewed', projectId, appVersion: '1.2.3', buildNumber: '45', appVariant: 'prod',
        platform: 'web', apiOrigin: 'https://api.example.test', properties: JSON.stringify({ q: AWKWARD }), eventId: 'a1',
      },
      // Keyed by service (no project column); now, since the table keeps 7 days.
      recent_contexts: { seenAt: recentlySeen, serviceId: projectId, environment: 'production', targetingKey: AWKWARD, attributes: JSON.stringify({ note: AWKWARD }) },
    };
    for (const table of Object.keys(samples) as (keyof AnalyticsRows)[]) expect(writer.record(table, samples[table] as never)).toBe(true);
    await writer.close();
    expect(Object.values(writer.stats()).every((s) => s.buffered === 0 && s.dropped === 0 && s.healthy)).toBe(true);

    // 64-bit integers read as text, the same from chDB and a server.
    const time = (column: string) => `toString(toUnixTimestamp64Milli(${column})) AS ms`;
    const [o] = await rows(`SELECT *, ${time('timestamp')} FROM outcome_events WHERE project_id = {projectId:String}`, { projectId });
    expect(o).toMatchObject({ event: 'signup', targeting_key_hash: AWKWARD, value: null, flags, origin: 'track', event_id: AWKWARD, ms: String(T0 + 1) });
    const [t] = await rows(
      `SELECT flag_key, variant, toString(evaluations) AS evaluations, toString(cache_hits) AS cache_hits, toString(cache_misses) AS cache_misses, avg_latency_ms, ${time('timestamp')}
       FROM sdk_telemetry WHERE project_id = {projectId:String}`,
      { projectId },
    );
    expect(t).toEqual({ flag_key: AWKWARD, variant: AWKWARD, evaluations: '12345678901', cache_hits: '7', cache_misses: '0', avg_latency_ms: 0.125, ms: String(T0) });
    const [d] = await rows(
      'SELECT toString(total_evaluations) AS total, toString(cache_hits) AS hits, cache_hit_ratio, tracked_flags FROM sdk_diagnostics WHERE project_id = {projectId:String}',
      { projectId },
    );
    expect(d).toEqual({ total: '100', hits: '90', cache_hit_ratio: 0.9, tracked_flags: 3 });
    const vitals = await rows('SELECT * FROM web_vitals WHERE project_id = {projectId:String} ORDER BY origin', { projectId });
    // The sdk row, plus none from the browser (its event was 'custom', not 'webvital').
    expect(vitals).toEqual([expect.objectContaining({ origin: 'sdk', name: 'lcp', value: 2512.5, rating: 'needs-improvement', active_flags: flags, session_id: AWKWARD, url: AWKWARD })]);
    const [c] = await rows('SELECT * FROM client_errors WHERE project_id = {projectId:String}', { projectId });
    expect(c).toMatchObject({ message: AWKWARD, stack: `${AWKWARD}\n  at x`, active_flags: {} });
    const [b] = await rows(`SELECT *, ${time('received_at')} FROM browser_events WHERE project_id = {projectId:String}`, { projectId });
    expect(b).toMatchObject({ type: 'custom', name: 'cta', value: -1.5, referrer: AWKWARD, flags, data: JSON.stringify({ note: AWKWARD }), ms: String(T0 + 5) });
    const [a] = await rows('SELECT * FROM admin_events WHERE project_id = {projectId:String}', { projectId });
    expect(a).toMatchObject({ site_id: 'svc_admin_dev', event: 'flag_viewed', properties: JSON.stringify({ q: AWKWARD }), app_version: '1.2.3' });
    const [r] = await rows(`SELECT *, ${time('seen_at')} FROM recent_contexts WHERE service_id = {projectId:String}`, { projectId });
    expect(r).toMatchObject({ targeting_key: AWKWARD, attributes: JSON.stringify({ note: AWKWARD }), ms: String(recentlySeen) });
  });

  it('writes full batches at once and partial ones on flush, and reports per table', async () => {
    const projectId = freshProject();
    const writer = new AnalyticsWriter(options({ batchSize: 10 }));
    // A full batch goes without being asked; a partial one waits for the interval (a minute here) or a flush.
    for (let i = 0; i < 10; i++) writer.record('outcome_events', outcome(projectId, i));
    await eventually(async () => writer.stats().outcome_events.written === 10);
    for (let i = 10; i < 15; i++) writer.record('outcome_events', outcome(projectId, i));
    await new Promise((r) => setTimeout(r, 50));
    expect(writer.stats().outcome_events).toMatchObject({ written: 10, buffered: 5, dropped: 0 });
    await writer.flush();
    expect(writer.stats().outcome_events).toMatchObject({ written: 15, buffered: 0, dropped: 0, failedBatches: 0, healthy: true });
    expect(writer.stats().sdk_telemetry).toMatchObject({ written: 0, buffered: 0 });
    expect(await count('SELECT count() AS n FROM outcome_events WHERE project_id = {projectId:String}', projectId)).toBe(15);
    await writer.close();
  });

  it('refuses rows beyond its memory bound (record answers false) and counts them, per table', async () => {
    const projectId = freshProject();
    const writer = new AnalyticsWriter(options({ batchSize: 100, maxBuffered: 4 }));
    const accepted = Array.from({ length: 6 }, (_, i) => writer.record('outcome_events', outcome(projectId, i)));
    expect(accepted).toEqual([true, true, true, true, false, false]);
    // Another table has its own bound.
    expect(writer.record('browser_events', browserEvent(projectId, 1, {}))).toBe(true);
    expect(writer.stats().outcome_events).toMatchObject({ buffered: 4, dropped: 2 });
    await writer.close();
    expect(await count('SELECT count() AS n FROM outcome_events WHERE project_id = {projectId:String}', projectId)).toBe(4);
    expect(writer.stats().outcome_events).toMatchObject({ written: 4, dropped: 2 });
  });

  it('counts a batch once when its insert is retried after ClickHouse stored it: raw table and rollup', async () => {
    const projectId = freshProject();
    const flaky = answerLostAfterInsert(2);
    const writer = new TableWriter(ROW_FORMATS.outcome_events, options({ analytics: flaky.analytics, batchSize: 100, instanceId: 'writer-test' }));
    for (let i = 0; i < 10; i++) writer.record(outcome(projectId, i));
    await writer.flush();
    // Three tries of one batch, each stored by ClickHouse, all with the same token.
    expect(flaky.inserts()).toBe(3);
    expect(new Set(flaky.tokens).size).toBe(1);
    expect(flaky.tokens[0]).toBe('writer-test:outcome_events:1');
    expect(writer.stats()).toMatchObject({ written: 10, dropped: 0, failedBatches: 0, healthy: true });

    expect(await count('SELECT count() AS n FROM outcome_events WHERE project_id = {projectId:String}', projectId)).toBe(10);
    expect(await count('SELECT sum(events) AS n FROM outcome_minutes WHERE project_id = {projectId:String}', projectId)).toBe(10);
    expect(await count('SELECT sum(valued) AS n FROM outcome_minutes WHERE project_id = {projectId:String}', projectId)).toBe(5);
    // Values 0, 2, 4, 6, 8 (odd rows carry none).
    expect(await count('SELECT sum(value_sum) AS n FROM outcome_minutes WHERE project_id = {projectId:String}', projectId)).toBe(20);

    // The next batch has its own token: identical rows sent again are new events, not a retry.
    for (let i = 0; i < 10; i++) writer.record(outcome(projectId, i));
    await writer.close();
    expect(flaky.tokens[3]).toBe('writer-test:outcome_events:2');
    expect(await count('SELECT count() AS n FROM outcome_events WHERE project_id = {projectId:String}', projectId)).toBe(20);
    expect(await count('SELECT sum(events) AS n FROM outcome_minutes WHERE project_id = {projectId:String}', projectId)).toBe(20);
  });

  it('counts a retried batch of evaluation requests once: the landing table\'s view, the raw table and the rollup', async () => {
    const projectId = freshProject();
    const flaky = answerLostAfterInsert(2);
    const recorder = new EvaluationRecorder({ ...options({ analytics: flaky.analytics, batchSize: 1_000, instanceId: 'writer-test' }), foldMs: 1 });
    // The separators of a result's string inside fields, and their escapes written literally.
    const separators = `${AWKWARD} \x1f \x1e \x1e0 \x1e1 \x1f\x1e`;
    const results: EvaluationResult[] = [
      { flagKey: 'a', value: true, reason: 'TARGETING_MATCH', ruleId: 'r1', rolloutSide: 'in', rolloutRuleId: 'r1' },
      { flagKey: 'b', value: separators, reason: 'VARIANT', variant: separators },
    ];
    for (let i = 0; i < 5; i++) {
      recorder.recordRequest({ timestamp: T0 + i, projectId, serviceId: 'svc_w', environment: 'production', source: 'ofrep', targetingKey: `user-${i}`, latencyMs: 0.5, results });
    }
    await recorder.flush();
    expect(flaky.inserts()).toBe(3);
    expect(flaky.tokens[0]).toBe('writer-test:evaluation_requests:1');
    expect(recorder.stats()).toMatchObject({ written: 10, dropped: 0, healthy: true });

    expect(await count('SELECT count() AS n FROM evaluation_events WHERE project_id = {projectId:String}', projectId)).toBe(10);
    expect(await count('SELECT sum(evaluations) AS n FROM evaluation_minutes WHERE project_id = {projectId:String}', projectId)).toBe(10);
    const stored = await rows<{ flag_key: string; value: string; variant: string; n: string }>(
      'SELECT flag_key, value, variant, toString(count()) AS n FROM evaluation_events WHERE project_id = {projectId:String} GROUP BY flag_key, value, variant ORDER BY flag_key',
      { projectId },
    );
    expect(stored).toEqual([
      { flag_key: 'a', value: 'true', variant: '', n: '5' },
      { flag_key: 'b', value: JSON.stringify(separators), variant: separators, n: '5' },
    ]);
    const [rule] = await rows<{ rule_id: string; rollout_side: string; reason: string }>(
      "SELECT rule_id, rollout_side, reason FROM evaluation_events WHERE project_id = {projectId:String} AND flag_key = 'a' LIMIT 1",
      { projectId },
    );
    expect(rule).toEqual({ rule_id: 'r1', rollout_side: 'in', reason: 'TARGETING_MATCH' });

    // One event of a flag key from elsewhere (OpenTelemetry): any string, separators included.
    recorder.record({ timestamp: T0, projectId, serviceId: 'svc_w', environment: 'production', flagKey: 'otel\x1fkey\x1e1', reason: 'STATIC', variant: undefined, value: 1, latencyMs: 0, errorCode: 'GENERAL', ruleId: undefined, rolloutSide: undefined, targetingKey: 'u', source: 'otlp' });
    await recorder.close();
    const [otel] = await rows<{ flag_key: string; error_code: string; value: string }>(
      "SELECT flag_key, error_code, value FROM evaluation_events WHERE project_id = {projectId:String} AND source = 'otlp'",
      { projectId },
    );
    expect(otel).toEqual({ flag_key: 'otel\x1fkey\x1e1', error_code: 'GENERAL', value: '1' });
  });

  it('hands inserts full 128 KB chunks, not chunks cut at a row count and copied out', async () => {
    // A chunk sealed a quarter full was copied and its 128 KB dropped: memory outside the heap
    // churned at the rate of the events, and V8 ran full collections to reclaim it.
    const projectId = freshProject();
    const sizes: number[][] = [];
    const capturing: Analytics = { ...analytics, insertTabSeparated: async (insert) => void sizes.push(insert.chunks.map((c) => c.length)) };
    const recorder = new EvaluationRecorder({ ...options({ analytics: capturing, batchSize: 250_000, maxBuffered: 750_000 }), foldMs: 1 });
    const results: EvaluationResult[] = ['a', 'b', 'c', 'd', 'e'].map((flagKey) => ({ flagKey, value: false, reason: 'DEFAULT' }));
    for (let i = 0; i < 4_000; i++) {
      recorder.recordRequest({ timestamp: T0 + i, projectId, serviceId: 'svc_w', environment: 'production', source: 'ofrep', targetingKey: `user-${i}`, latencyMs: 0.5, results });
    }
    await recorder.close();
    const chunks = sizes.flat();
    const bytes = chunks.reduce((n, c) => n + c, 0);
    // Four thousand lines of five rows fill several chunks: each but the last one full.
    expect(bytes).toBeGreaterThan(4 * 128 * 1024);
    expect(chunks.length).toBe(Math.ceil(bytes / (127 * 1024)));
    for (const size of chunks.slice(0, -1)) expect(size).toBeGreaterThan(127 * 1024);
    expect(recorder.stats()).toMatchObject({ written: 20_000, dropped: 0 });
  });

  it('counts a retried browser batch once down the whole chain of views (web vitals, errors, their rollups)', async () => {
    const projectId = freshProject();
    const flaky = answerLostAfterInsert(1);
    const writer = new TableWriter(ROW_FORMATS.browser_events, options({ analytics: flaky.analytics, batchSize: 100 }));
    writer.record(browserEvent(projectId, 1, { type: 'pageview' }));
    writer.record(browserEvent(projectId, 2, { type: 'webvital', name: 'LCP', value: 1800, data: JSON.stringify({ rating: 'good' }) }));
    writer.record(browserEvent(projectId, 3, { type: 'webvital', name: 'CLS', value: 0.3, data: JSON.stringify({ rating: 'poor' }) }));
    writer.record(browserEvent(projectId, 4, { type: 'error', data: JSON.stringify({ message: 'boom', stack: 'at x' }) }));
    // flush, not close: a closing writer does not retry (shutdown must not wait on a failing store).
    await writer.flush();
    await writer.close();
    expect(flaky.inserts()).toBe(2);

    expect(await count('SELECT count() AS n FROM browser_events WHERE project_id = {projectId:String}', projectId)).toBe(4);
    expect(await count('SELECT sum(events) AS n FROM browser_minutes WHERE project_id = {projectId:String}', projectId)).toBe(4);
    expect(await count('SELECT count() AS n FROM web_vitals WHERE project_id = {projectId:String}', projectId)).toBe(2);
    const [vitals] = await rows(
      'SELECT toString(sum(samples)) AS samples, toString(sum(good)) AS good, toString(sum(poor)) AS poor FROM web_vital_minutes WHERE project_id = {projectId:String}',
      { projectId },
    );
    expect(vitals).toEqual({ samples: '2', good: '1', poor: '1' });
    expect(await count('SELECT count() AS n FROM client_errors WHERE project_id = {projectId:String}', projectId)).toBe(1);
  });

  it('drops a batch after its attempts and counts it; the table reports unhealthy with the error', async () => {
    const failing: Analytics = { ...analytics, insertTabSeparated: async () => Promise.reject(new Error('connection refused')) };
    const writer = new AnalyticsWriter(options({ analytics: failing, maxAttempts: 2 }));
    for (let i = 0; i < 3; i++) writer.record('sdk_diagnostics', { timestamp: T0, projectId: 'p', serviceId: 's', environment: 'production', totalEvaluations: 1, cacheHits: 1, cacheHitRatio: 1, trackedFlags: 1, eventId: `x${i}` });
    await writer.close();
    expect(writer.stats().sdk_diagnostics).toMatchObject({ healthy: false, written: 0, dropped: 3, failedBatches: 1, lastError: 'connection refused' });
    expect(writer.stats().outcome_events).toMatchObject({ healthy: true, dropped: 0 });
  });
});
