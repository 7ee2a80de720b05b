/**
 * `npm run bench:writer`: sustained throughput of the evaluation event writer
 * (api/features/evaluation/recorder.ts) into ClickHouse: chDB in-process unless CLICKHOUSE_URL
 * is set. Events are produced as fast as the buffer accepts them for BENCH_DURATION seconds
 * (default 20); the run reports events/s written, drops, and heap/RSS over time so growth
 * shows. The bar (docs/quality-bars.md): >= 200,000 events/s sustained without growing memory.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openAnalytics } from '../analytics/client';
import { migrateAnalytics } from '../analytics/migrate';
import { EvaluationRecorder, type EvaluationEvent } from '../api/features/evaluation/recorder';
import { createLogger } from '../api/infra/logger';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 20);
const BATCH = Number(process.env.BENCH_BATCH ?? 100_000);

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-writer-bench-'));
  const database = `writer_bench_${process.pid}`;
  const analytics = await openAnalytics({ url: process.env.CLICKHOUSE_URL, database, chdbPath: path.join(dir, 'chdb') });
  await migrateAnalytics(analytics);
  const recorder = new EvaluationRecorder({
    analytics,
    logger: createLogger('warn'),
    batchSize: BATCH,
    flushIntervalMs: 200,
    maxBuffered: BATCH * 3,
    maxAttempts: 3,
    retryBaseMs: 200,
  });
  recorder.start();
  const flags = Array.from({ length: 200 }, (_, i) => `flag-${i}`);
  let produced = 0;
  const started = Date.now();
  const samples: string[] = [];
  let lastWritten = 0;
  let lastAt = started;
  const sampler = setInterval(() => {
    const s = recorder.stats();
    const m = process.memoryUsage();
    const now = Date.now();
    samples.push(
      `t=${((now - started) / 1000).toFixed(0)}s written=${s.written} (+${Math.round(((s.written - lastWritten) * 1000) / (now - lastAt))}/s) buffered=${s.buffered} dropped=${s.dropped} heap=${Math.round(m.heapUsed / 1e6)}MB rss=${Math.round(m.rss / 1e6)}MB`,
    );
    console.log(samples[samples.length - 1]);
    lastWritten = s.written;
    lastAt = now;
  }, 2_000);
  // Produce in slices, keeping the buffer topped up without dropping (the writer is the bottleneck).
  while (Date.now() - started < DURATION_S * 1000) {
    const room = BATCH * 3 - recorder.stats().buffered - recorder.stats().inFlight;
    const n = Math.min(room, 10_000);
    const now = Date.now();
    for (let i = 0; i < n; i++, produced++) {
      const event: EvaluationEvent = {
        timestamp: now,
        projectId: 'prj_bench',
        serviceId: 'svc_bench',
        environment: 'production',
        flagKey: flags[produced % flags.length],
        reason: produced % 7 === 0 ? 'TARGETING_MATCH' : 'DEFAULT',
        variant: undefined,
        value: produced % 2 === 0,
        latencyMs: 0.05,
        errorCode: undefined,
        ruleId: undefined,
        rolloutSide: undefined,
        targetingKey: `user-${produced % 50_000}`,
        source: 'rest',
      };
      recorder.record(event);
    }
    await new Promise((r) => setImmediate(r));
  }
  const elapsed = (Date.now() - started) / 1000;
  await recorder.close();
  clearInterval(sampler);
  const total = (Date.now() - started) / 1000;
  const s = recorder.stats();
  const rs = await analytics.client.query({ query: 'SELECT count() AS n FROM evaluation_events', format: 'JSONEachRow' });
  const [row] = (await rs.json()) as { n: string }[];
  console.log('');
  console.log(`produced ${produced} in ${elapsed.toFixed(1)} s; written ${s.written} (ClickHouse count ${row.n}), dropped ${s.dropped}`);
  console.log(`sustained: ${Math.round(s.written / total).toLocaleString('en-US')} events/s including the final flush (bar >= 200,000/s)`);
  await analytics.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
