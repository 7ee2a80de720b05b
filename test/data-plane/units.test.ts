import type { Analytics } from '../../analytics/client';
import { ContextRing } from '../../api/features/evaluation/contexts';
import { LocalRateLimiter } from '../../api/features/evaluation/local-rate-limiter';
import { EvaluationRecorder, hashTargetingKey, type EvaluationEvent } from '../../api/features/evaluation/recorder';
import { createCache } from '../../api/infra/cache';
import { createLogger } from '../../api/infra/logger';

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
    targetingKey: `user-${i % 3}`,
    source: 'rest',
  };
}

/** An Analytics whose insert fails `failures` times, then records the rows it gets. */
function fakeAnalytics(failures: number) {
  const batches: Record<string, unknown>[][] = [];
  let left = failures;
  const analytics = {
    backend: 'chdb',
    database: 'x',
    close: async () => undefined,
    client: {
      insert: async ({ values }: { values: AsyncIterable<Record<string, unknown>> }) => {
        const rows: Record<string, unknown>[] = [];
        for await (const row of values) rows.push(row);
        if (left > 0) {
          left--;
          throw new Error('insert failed');
        }
        batches.push(rows);
      },
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

  it('discards buffered events that match (DELETE /api/evaluations)', async () => {
    const { analytics, batches } = fakeAnalytics(0);
    const recorder = new EvaluationRecorder({ analytics, logger, batchSize: 100, flushIntervalMs: 60_000, maxBuffered: 100, maxAttempts: 1, retryBaseMs: 1 });
    recorder.record(event(1, 'gone'));
    recorder.record(event(2, 'kept'));
    recorder.discard((e) => e.flagKey === 'gone');
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
    values: [['f', i] as [string, unknown]],
    evaluations: 1,
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

  it('evicts the oldest entries past the byte budget', () => {
    const ring = new ContextRing(100, 50);
    for (let i = 0; i < 10; i++) ring.push(entry(i, 20));
    expect(ring.length).toBe(2);
    expect(ring.summaries('s').map((g) => g.attributes.n).sort()).toEqual([8, 9]);
  });
});
