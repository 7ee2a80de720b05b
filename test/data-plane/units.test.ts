import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openAnalytics, type Analytics } from '../../analytics/client';
import { migrateAnalytics } from '../../analytics/migrate';
import { ContextRing } from '../../api/features/evaluation/contexts';
import { LocalRateLimiter } from '../../api/features/evaluation/local-rate-limiter';
import { EnvironmentSnapshot } from '../../api/features/evaluation/snapshots';
import type { FlagRecord } from '../../api/features/flags/types';
import { EvaluationRecorder, hashTargetingKey, type EvaluationEvent, type EvaluationRequest } from '../../api/features/evaluation/recorder';
import { createCache } from '../../api/infra/cache';
import { createLogger } from '../../api/infra/logger';
import { tsvTime } from '../../analytics/writer';
import { compileFlag, evaluate } from '../../api/features/evaluation/engine/index';
import { eventually } from '../support/harness';
import { workerChdbPath } from '../support/chdb-path';

const logger = createLogger('silent');

function event(i: number, flagKey = 'f'): EvaluationEvent {
  return {
    timestamp: 1_700_000_000_000 + i,
    projectId: 'p',
    serviceId: 's',
    environment: 'development',
    flagKey,
    reason: 'DEFAULT',
    variant: undefined,
    value: i % 2 === 0,
    latencyMs: 0.1,
    errorCode: undefined,
    ruleId: undefined,
    rolloutSide: undefined,
    targetingKey: `user-${i % 3}`,
    source: 'rest',
  };
}

function request(overrides: Partial<EvaluationRequest> = {}): EvaluationRequest {
  return {
    timestamp: 1_700_000_000_000,
    projectId: 'p',
    serviceId: 's',
    environment: 'production',
    source: 'ofrep',
    targetingKey: 'user-1',
    latencyMs: 0.123,
    results: [
      { flagKey: 'a', value: true, reason: 'TARGETING_MATCH', ruleId: 'r1', rolloutSide: 'in', rolloutRuleId: 'r1' },
      { flagKey: 'b', value: 'blue', reason: 'VARIANT', variant: 'blue' },
    ],
    ...overrides,
  };
}

/** The elements of a `results` field (quoted strings, backslash escapes), each as its fields: what ClickHouse's view reads (analytics/schema/034). */
function parseResults(field: string): string[][] {
  const elements: string[][] = [];
  for (let i = 1; i < field.length - 1; i++) {
    if (field[i] !== "'") continue;
    let text = '';
    for (i++; field[i] !== "'"; i++) {
      if (field[i] === '\\') {
        i++;
        text += ({ t: '\t', n: '\n', r: '\r', '0': '\0' } as Record<string, string>)[field[i]] ?? field[i];
      } else text += field[i];
    }
    elements.push(text.split('\x1f').map((f) => f.replaceAll('\x1e1', '\x1f').replaceAll('\x1e0', '\x1e')));
  }
  return elements;
}

const RESULT_COLUMNS = ['flag_key', 'reason', 'variant', 'value', 'error_code', 'rule_id', 'rollout_side'];

/** An Analytics whose insert fails `failures` times, then records the rows it gets: a row per flag of each request line, as ClickHouse's view makes them. */
function fakeAnalytics(failures: number, delayMs = 0) {
  const batches: Record<string, unknown>[][] = [];
  let left = failures;
  const analytics = {
    backend: 'chdb',
    database: 'x',
    close: async () => undefined,
    insertTabSeparated: async ({ chunks, columns, table }: { chunks: Buffer[]; columns: string[]; table: string }) => {
      expect(table).toBe('evaluation_requests');
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      const text = Buffer.concat(chunks).toString('utf8');
      const rows = text
        .split('\n')
        .slice(0, -1)
        .flatMap((line) => {
          const request = Object.fromEntries(line.split('\t').map((field, i) => [columns[i], field]));
          const { results, ...fields } = request;
          return parseResults(results).map((tuple) => ({ ...fields, ...Object.fromEntries(tuple.map((v, i) => [RESULT_COLUMNS[i], v])) }));
        });
      if (left > 0) {
        left--;
        throw new Error('insert failed');
      }
      batches.push(rows);
    },
  } as unknown as Analytics;
  return { analytics, batches };
}

describe('EvaluationRecorder', () => {
  it('writes in batches of batchSize with hashed targeting keys and JSON values', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 4, flushIntervalMs: 60_000, maxBuffered: 100, maxAttempts: 3, retryBaseMs: 1 });
    for (let i = 0; i < 10; i++) recorder.record(event(i));
    await recorder.close();
    expect(batches.map((b) => b.length)).toEqual([4, 4, 2]);
    expect(batches[0][0]).toMatchObject({ flag_key: 'f', value: 'true', variant: '', error_code: '', targeting_key_hash: hashTargetingKey('user-0'), source: 'rest' });
    expect(hashTargetingKey('user-0')).toMatch(/^[0-9a-f]{32}$/);
    expect(recorder.stats()).toMatchObject({ written: 10, dropped: 0, buffered: 0, healthy: true });
  });

  it('retries a failed insert and keeps the batch', async () => {
    const { analytics, batches } = fakeAnalytics(2);
    const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 10, flushIntervalMs: 60_000, maxBuffered: 100, maxAttempts: 3, retryBaseMs: 1 });
    for (let i = 0; i < 5; i++) recorder.record(event(i));
    await recorder.flush();
    expect(batches).toHaveLength(1);
    expect(recorder.stats()).toMatchObject({ written: 5, dropped: 0, failedBatches: 0, healthy: true });
  });

  it('drops and counts a batch after maxAttempts, and drops new events past maxBuffered', async () => {
    const { analytics } = fakeAnalytics(100);
    const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 10, flushIntervalMs: 60_000, maxBuffered: 8, maxAttempts: 2, retryBaseMs: 1 });
    for (let i = 0; i < 12; i++) recorder.record(event(i));
    expect(recorder.stats()).toMatchObject({ buffered: 8, dropped: 4 });
    await recorder.flush();
    expect(recorder.stats()).toMatchObject({ buffered: 0, written: 0, dropped: 12, failedBatches: 1, healthy: false, lastError: 'insert failed' });
  });

  it('writes what was waiting when a flush began; a trickle meanwhile waits for the next flush', async () => {
    const { analytics, batches } = fakeAnalytics(0, 30);
    const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 100, flushIntervalMs: 60_000, maxBuffered: 1000, maxAttempts: 1, retryBaseMs: 1 });
    for (let i = 0; i < 5; i++) recorder.record(event(i));
    const first = recorder.flush();
    await new Promise((r) => setTimeout(r, 5));
    for (let i = 0; i < 3; i++) recorder.record(event(i));
    await first;
    // No insert storm: the three that arrived during the insert were not written on their own.
    expect(batches.map((b) => b.length)).toEqual([5]);
    expect(recorder.stats()).toMatchObject({ buffered: 3, written: 5 });
    await recorder.flush();
    expect(batches.map((b) => b.length)).toEqual([5, 3]);
  });

  it('a flush asked for during another one still writes the events recorded before it was asked', async () => {
    const { analytics, batches } = fakeAnalytics(0, 30);
    const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 100, flushIntervalMs: 60_000, maxBuffered: 1000, maxAttempts: 1, retryBaseMs: 1 });
    for (let i = 0; i < 5; i++) recorder.record(event(i));
    void recorder.flush();
    await new Promise((r) => setTimeout(r, 5));
    for (let i = 0; i < 3; i++) recorder.record(event(i));
    await recorder.flush();
    expect(batches.flat()).toHaveLength(8);
    expect(recorder.stats()).toMatchObject({ buffered: 0, written: 8 });
  });

  it('keeps full batches flowing, two inserts at a time', async () => {
    const { analytics, batches } = fakeAnalytics(0, 20);
    let concurrent = 0;
    let most = 0;
    const insert = analytics.insertTabSeparated;
    analytics.insertTabSeparated = async (params) => {
      most = Math.max(most, ++concurrent);
      try {
        return await insert(params);
      } finally {
        concurrent--;
      }
    };
    const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 10, flushIntervalMs: 60_000, maxBuffered: 1000, maxAttempts: 1, retryBaseMs: 1 });
    for (let i = 0; i < 60; i++) recorder.record(event(i));
    await recorder.flush();
    expect(batches.map((b) => b.length)).toEqual([10, 10, 10, 10, 10, 10]);
    expect(most).toBe(2);
  });

  it('discards buffered events that match (DELETE /api/evaluations)', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 100, flushIntervalMs: 60_000, maxBuffered: 100, maxAttempts: 1, retryBaseMs: 1 });
    recorder.record(event(1, 'gone'));
    recorder.record(event(2, 'kept'));
    recorder.discard({ projectIds: new Set(['p']), flagKey: 'gone' });
    await recorder.flush();
    expect(batches[0].map((r) => r.flag_key)).toEqual(['kept']);
  });
});

describe('LocalRateLimiter', () => {
  it('decides locally and shares one counter through the cache', async () => {
    const cache = createCache(undefined);
    const a = new LocalRateLimiter({ cache, windowSeconds: 60, syncIntervalMs: 1_000, logger });
    const b = new LocalRateLimiter({ cache, windowSeconds: 60, syncIntervalMs: 1_000, logger });
    for (let i = 0; i < 3; i++) expect(a.consume('ip:1', 5).allowed).toBe(true);
    await a.sync();
    // Replica b learns a's hits at its next sync; its own hits count from there.
    expect(b.consume('ip:1', 5)).toMatchObject({ allowed: true, remaining: 4 });
    await b.sync();
    expect(b.consume('ip:1', 5)).toMatchObject({ allowed: true, remaining: 0 });
    expect(b.consume('ip:1', 5)).toMatchObject({ allowed: false, remaining: 0 });
    const shared = await cache.hit('rl:ip:1', 60, 0);
    expect(shared.count).toBe(4);
    await a.stop();
    await b.stop();
    await cache.close();
  });

  it('resets after the window', () => {
    const cache = createCache(undefined);
    const limiter = new LocalRateLimiter({ cache, windowSeconds: 1, syncIntervalMs: 1_000, logger });
    const now = Date.now();
    expect(limiter.consume('k', 1, now).allowed).toBe(true);
    expect(limiter.consume('k', 1, now + 10).allowed).toBe(false);
    expect(limiter.consume('k', 1, now + 1_500).allowed).toBe(true);
    void cache.close();
  });
});

describe('ContextRing', () => {
  const entry = (i: number, bytes = 10) => ({
    at: 1_700_000_000_000 + i,
    serviceId: 's',
    environment: 'development',
    targetingKey: `u${i % 5}`,
    context: { targetingKey: `u${i % 5}`, n: i },
    results: [{ flagKey: 'f', value: i }],
    bytes,
  });

  it('keeps the last `capacity` entries and groups them by targetingKey', () => {
    const ring = new ContextRing(10, 1_000_000);
    for (let i = 0; i < 25; i++) ring.push(entry(i));
    expect(ring.length).toBe(10);
    const groups = ring.summaries('s');
    expect(groups).toHaveLength(5);
    const u0 = groups.find((g) => g.targetingKey === 'u0')!;
    expect(u0).toMatchObject({ evaluationCount: 2, attributes: { n: 20 }, flags: { f: 20 } });
    expect(groups[0].targetingKey).toBe('u4');
    expect(ring.summaries('other')).toEqual([]);
  });

  it('takes at most `capacity` requests a second, then samples until the next second', () => {
    const ring = new ContextRing(3, 1_000_000);
    const second = 1_700_000_000_000;
    expect([0, 10, 20, 30, 999].map((ms) => ring.takes(second + ms))).toEqual([true, true, true, false, false]);
    expect(ring.takes(second + 1_000)).toBe(true);
  });

  it('evicts the oldest entries past the byte budget (body and values shown)', () => {
    // Each entry counts 20 bytes of body and 64 for its one value: two fit in 200.
    const ring = new ContextRing(100, 200);
    for (let i = 0; i < 10; i++) ring.push(entry(i, 20));
    expect(ring.length).toBe(2);
    expect(ring.summaries('s').map((g) => g.attributes.n).sort()).toEqual([8, 9]);
  });
});

describe('EvaluationRecorder folding alike requests', () => {
  const options = { logger, batchSize: 1000, flushIntervalMs: 60_000, maxBuffered: 1000, maxAttempts: 1, retryBaseMs: 1 };

  it('writes alike requests as one row per flag with their count, stamped with the first one', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, ...options });
    for (let i = 0; i < 10; i++) recorder.recordRequest(request({ timestamp: 1_700_000_000_000 + i, latencyMs: 0.121 + i / 10_000 }));
    await recorder.flush();
    expect(batches.flat()).toEqual([
      expect.objectContaining({ flag_key: 'a', evaluations: '10', latency_ms: '0.12', value: 'true', rule_id: 'r1', rollout_side: 'in', timestamp: tsvTime(1_700_000_000_000), targeting_key_hash: hashTargetingKey('user-1') }),
      expect.objectContaining({ flag_key: 'b', evaluations: '10', latency_ms: '0.12', value: '"blue"', variant: 'blue', reason: 'VARIANT' }),
    ]);
    expect(recorder.stats()).toMatchObject({ requests: 10, folded: 2, written: 2 });
  });

  it('writes each user of interned results with their own key, flags and rollout sides (the parts kept per result)', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, ...options });
    const flags = ['ramp-a', 'ramp-b'].map((key) =>
      compileFlag({ key, type: 'boolean', enabled: true, defaultValue: false, variants: [], targeting: [{ id: `r-${key}`, conditions: [], value: true, rolloutPercentage: 50 }] } as never),
    );
    const users = Array.from({ length: 40 }, (_, i) => `user-${i}`);
    const results = users.map((user) => flags.map((flag, i) => evaluate(flag, ['ramp-a', 'ramp-b'][i], { targetingKey: user }, undefined)));
    for (const [i, user] of users.entries()) recorder.recordRequest(request({ targetingKey: user, results: results[i] }));
    // The same users again within the window fold onto their first request.
    for (const [i, user] of users.entries()) recorder.recordRequest(request({ targetingKey: user, results: results[i] }));
    await recorder.flush();
    const rows = batches.flat();
    expect(rows).toHaveLength(users.length * flags.length);
    for (const [i, user] of users.entries()) {
      for (const [f, flagKey] of ['ramp-a', 'ramp-b'].entries()) {
        const result = results[i][f];
        expect(rows.filter((r) => r.targeting_key_hash === hashTargetingKey(user) && r.flag_key === flagKey)).toEqual([
          expect.objectContaining({ evaluations: '2', value: String(result.value), rule_id: `r-${flagKey}`, rollout_side: result.rolloutSide, source: 'ofrep', environment: 'production' }),
        ]);
      }
    }
    // Both sides of each rollout occur among 40 users, so the parts of four interned results were reused.
    expect(new Set(rows.map((r) => `${r.flag_key}:${r.rollout_side}`)).size).toBe(4);
  });

  it('keeps apart requests that differ in anything but time: key, result, latency, protocol, environment', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, ...options });
    const base = request();
    const variants = [
      base,
      request({ targetingKey: 'user-2' }),
      request({ targetingKey: undefined }),
      request({ latencyMs: 0.5 }),
      request({ source: 'rest' }),
      request({ environment: 'staging' }),
      request({ results: [{ ...base.results[0], value: false }, base.results[1]] }),
      request({ results: [{ ...base.results[0], rolloutSide: 'out', reason: 'DEFAULT', value: false }, base.results[1]] }),
      request({ results: [base.results[0], { ...base.results[1], value: '"blue"' }] }),
      request({ results: [base.results[0]] }),
    ];
    for (const r of variants) recorder.recordRequest(r);
    recorder.recordRequest(request());
    await recorder.flush();
    const rows = batches.flat();
    expect(rows).toHaveLength(variants.reduce((n, r) => n + r.results.length, 0));
    expect(rows.filter((r) => r.evaluations === '2')).toHaveLength(2);
  });

  it('folds each of a user\'s differing requests with its own alike ones', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, ...options });
    for (const latencyMs of [0.123, 0.5, 0.124, 0.501, 0.49, 7]) recorder.recordRequest(request({ latencyMs, results: [request().results[0]] }));
    await recorder.flush();
    expect(batches.flat().map((r) => `${r.latency_ms}x${r.evaluations}`)).toEqual(['0.12x2', '0.5x2', '0.49x1', '7x1']);
  });

  it('cannot be made to fold different requests together by separators in the targeting key or value', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, ...options });
    const one = { flagKey: 'a', value: 'x\u0001', reason: 'ERROR' as const, errorCode: 'TYPE_MISMATCH' as const };
    recorder.recordRequest(request({ targetingKey: 'k\u00011:k', results: [one] }));
    recorder.recordRequest(request({ targetingKey: 'k', results: [one] }));
    recorder.recordRequest(request({ targetingKey: 'k', results: [{ ...one, value: 'x' }] }));
    await recorder.flush();
    expect(batches.flat().map((r) => r.evaluations)).toEqual(['1', '1', '1']);
  });

  it('hands its folded requests to the writer when they reach maxGroups, so memory stays bounded', async () => {
    const { analytics } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, ...options, maxGroups: 3 });
    for (let i = 0; i < 2; i++) recorder.recordRequest(request({ targetingKey: `user-${i}` }));
    expect(recorder.stats()).toMatchObject({ buffered: 4, folded: 0 });
    recorder.recordRequest(request({ targetingKey: 'user-2' }));
    // The window closed; its requests reach the writer on the next turn.
    await new Promise((resolve) => setImmediate(resolve));
    expect(recorder.stats()).toMatchObject({ buffered: 6, folded: 6 });
    recorder.recordRequest(request({ targetingKey: 'user-3' }));
    expect(recorder.stats()).toMatchObject({ buffered: 8, folded: 6 });
  });

  it('hands a closed window to the writer a slice per turn, whole requests, and all of it on flush', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, ...options, maxBuffered: 100_000, maxGroups: 1_500 });
    const results = Array.from({ length: 5 }, (_, i) => ({ flagKey: `f${i}`, value: true, reason: 'DEFAULT' as const }));
    for (let i = 0; i < 1_500; i++) recorder.recordRequest(request({ targetingKey: `user-${i}`, results }));
    expect(recorder.stats()).toMatchObject({ buffered: 7_500, folded: 0 });
    await new Promise((resolve) => setImmediate(resolve));
    const afterOneTurn = recorder.stats().folded;
    expect(afterOneTurn).toBeGreaterThanOrEqual(2_000);
    expect(afterOneTurn).toBeLessThan(7_500);
    expect(afterOneTurn % 5).toBe(0);
    await recorder.flush();
    expect(recorder.stats()).toMatchObject({ folded: 7_500, written: 7_500, buffered: 0 });
    expect(new Set(batches.flat().map((r) => r.targeting_key_hash)).size).toBe(1_500);
  });

  it('writes a full batch without closing the folding window early', async () => {
    const { analytics } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, ...options, batchSize: 10, maxBuffered: 100_000, maxGroups: 6, foldMs: 60_000 });
    // Six users close the first window (12 rows, more than a batch); three more open the next.
    for (let i = 0; i < 6; i++) recorder.recordRequest(request({ targetingKey: `first-${i}` }));
    for (let i = 0; i < 3; i++) recorder.recordRequest(request({ targetingKey: `next-${i}` }));
    // A turn hands the closed window over and fills a batch; the next writes it.
    for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(recorder.stats()).toMatchObject({ folded: 12, buffered: 6 });
    await recorder.flush();
    expect(recorder.stats()).toMatchObject({ folded: 18, written: 18, buffered: 0 });
  });

  it('forgets a flag’s folded requests on discard and keeps the other flags of the same requests', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, ...options });
    recorder.recordRequest(request());
    recorder.recordRequest(request());
    recorder.discard({ projectIds: new Set(['p']), flagKey: 'a' });
    await recorder.flush();
    expect(batches.flat().map((r) => [r.flag_key, r.evaluations])).toEqual([['b', '2']]);
  });
});

describe('EvaluationRecorder into chDB', () => {
  it('waits for a schema its owner has not created yet, without spending attempts or dropping events', async () => {
    // A data plane's writer: it never creates tables, the control plane (here migrateAnalytics) does.
    const database = `recorder_wait_${process.pid}`;
    const analytics = await openAnalytics({ database, chdbPath: workerChdbPath() });
    try {
      const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 1000, flushIntervalMs: 60_000, maxBuffered: 1000, maxAttempts: 1, retryBaseMs: 5 });
      recorder.record({ ...event(1, 'early-flag'), timestamp: Math.floor(Date.now() / 1000) * 1000 });
      const flushed = recorder.flush();
      await eventually(async () => recorder.stats().lastError?.includes('does not exist'));
      // Several tries have failed by now, with one attempt allowed: none was counted.
      await new Promise((r) => setTimeout(r, 100));
      expect(recorder.stats()).toMatchObject({ healthy: false, dropped: 0, failedBatches: 0, written: 0 });
      await migrateAnalytics(analytics);
      await flushed;
      expect(recorder.stats()).toMatchObject({ healthy: true, written: 1, dropped: 0, failedBatches: 0 });
      await recorder.close();
    } finally {
      await analytics.client.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
      await analytics.close();
    }
  });

  it('rolls folded rows up by their weight: counts, latency sums and percentiles as if written one by one', async () => {
    const database = `recorder_weights_${process.pid}`;
    const analytics = await openAnalytics({ database, chdbPath: workerChdbPath() });
    try {
      await migrateAnalytics(analytics);
      const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 1000, flushIntervalMs: 60_000, maxBuffered: 1000, maxAttempts: 1, retryBaseMs: 1 });
      const minute = Math.floor(Date.now() / 60_000) * 60_000;
      for (let i = 0; i < 90; i++) recorder.recordRequest(request({ timestamp: minute + i, latencyMs: 1 }));
      for (let i = 0; i < 10; i++) recorder.recordRequest(request({ timestamp: minute + 100 + i, latencyMs: 50 }));
      await recorder.close();
      const rs = await analytics.client.query({
        query: `SELECT sum(evaluations) AS n, sum(latency_sum) AS latency, quantilesExactWeightedMerge(0.5, 0.95, 0.99)(latency_histogram) AS q
                FROM evaluation_minutes WHERE flag_key = 'a' AND minute = toDateTime({minute:UInt32})`,
        query_params: { minute: minute / 1000 },
        format: 'JSONEachRow',
      });
      const [row] = (await rs.json()) as { n: string; latency: number; q: number[] }[];
      expect(Number(row.n)).toBe(100);
      expect(Number(row.latency)).toBeCloseTo(90 * 1 + 10 * 50, 3);
      expect(row.q.map(Number)).toEqual([1, 50, 50]);
      const raw = await analytics.client.query({ query: `SELECT count() AS rows FROM evaluation_events WHERE flag_key = 'a'`, format: 'JSONEachRow' });
      expect((await raw.json()).map((r) => Number((r as { rows: unknown }).rows))).toEqual([2]);
    } finally {
      await analytics.client.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
      await analytics.close();
    }
  });

  it('stores awkward strings exactly (TabSeparated escaping) and millisecond timestamps', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recorder-chdb-'));
    // One chDB path per process (as the harness): a database of our own inside it.
    const analytics = await openAnalytics({ database: `recorder_${process.pid}`, chdbPath: workerChdbPath() });
    try {
      await migrateAnalytics(analytics);
      const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 1000, flushIntervalMs: 60_000, maxBuffered: 1000, maxAttempts: 1, retryBaseMs: 1 });
      // Recent (the table's TTL drops rows older than 90 days), with 1- and 3-digit milliseconds.
      const second = Math.floor(Date.now() / 1000) * 1000;
      const awkward = 'tab\there, newline\nthere, back\\slash, cr\r, nul\0 and "quotes"';
      recorder.record({ ...event(7, 'odd-flag'), variant: awkward, value: { text: awkward, n: 1 }, errorCode: 'E\tX', timestamp: second + 7 });
      recorder.record({ ...event(8, 'odd-flag'), value: undefined, targetingKey: undefined, timestamp: second + 120 });
      await recorder.close();
      const rs = await analytics.client.query({
        query: `SELECT toUnixTimestamp64Milli(timestamp) AS ms, variant, value, error_code, targeting_key_hash FROM evaluation_events WHERE flag_key = 'odd-flag' ORDER BY ms`,
        format: 'JSONEachRow',
      });
      const rows = (await rs.json()) as { ms: string; variant: string; value: string; error_code: string; targeting_key_hash: string }[];
      expect(rows.map((r) => ({ ...r, ms: Number(r.ms) }))).toEqual([
        { ms: second + 7, variant: awkward, value: JSON.stringify({ text: awkward, n: 1 }), error_code: 'E\tX', targeting_key_hash: hashTargetingKey('user-1') },
        { ms: second + 120, variant: '', value: 'null', error_code: '', targeting_key_hash: '' },
      ]);
    } finally {
      await analytics.client.command({ query: `DROP DATABASE IF EXISTS recorder_${process.pid}` }).catch(() => undefined);
      await analytics.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('tsvTime', () => {
  it('writes epoch milliseconds as seconds with three decimals, rounding a fractional millisecond', () => {
    expect(tsvTime(1_795_468_132_625)).toBe('1795468132.625');
    expect(tsvTime(1_795_468_132_005)).toBe('1795468132.005');
    expect(tsvTime(1_795_468_132_624.6)).toBe('1795468132.625');
    expect(tsvTime(1_795_468_132_999.7)).toBe('1795468133.000');
  });
});

describe('EnvironmentSnapshot answer validators', () => {
  const record = (version: number, isPublic = false): FlagRecord => ({
    id: 'flg_1',
    projectId: 'p',
    serviceId: 's',
    environment: 'production',
    key: 'checkout',
    name: 'Checkout',
    description: '',
    type: 'boolean',
    enabled: true,
    defaultValue: false,
    tags: [],
    variants: [],
    targeting: [],
    isPublic,
    version,
    createdAt: '2026-11-24T00:00:00.000Z',
    updatedAt: `2026-11-24T00:00:0${version}.000Z`,
  });

  it('keeps a context’s ETag until a flag changes, and tells contexts, windows and visibilities apart', () => {
    const snapshot = new EnvironmentSnapshot('s', 'production');
    snapshot.set(record(1));
    const first = snapshot.answerEtag('all', '{"targetingKey":"a"}', '');
    expect(snapshot.answerEtag('all', '{"targetingKey":"a"}', '')).toBe(first);
    const others = [
      snapshot.answerEtag('all', '{"targetingKey":"b"}', ''),
      snapshot.answerEtag('all', '{"targetingKey":"a"}', '7'),
      snapshot.answerEtag('public', '{"targetingKey":"a"}', ''),
    ];
    expect(new Set([first, ...others]).size).toBe(4);
    snapshot.set(record(2));
    expect(snapshot.answerEtag('all', '{"targetingKey":"a"}', '')).not.toBe(first);
    expect(snapshot.lastModifiedHttpDate()).toBe(new Date('2026-11-24T00:00:02.000Z').toUTCString());
  });
});
