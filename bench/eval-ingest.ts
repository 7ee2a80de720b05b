/**
 * `npm run bench:ingest`: what chDB spends, per 10,000 evaluation requests, to store the
 * evaluation events of new users (bench:peers' bulk-users row: every request another user, five
 * flags, nothing to fold). The embedded profile pays this on the core that serves requests; on
 * the production profile a ClickHouse elsewhere does.
 *
 * The request lines are made by the evaluation recorder itself (api/features/evaluation/recorder.ts),
 * captured as the batches it hands to ClickHouse, then inserted into chDB at BENCH_RATE requests
 * a second (default 18,000, about the bulk-users row's rate) for BENCH_DURATION seconds (default
 * 16), a batch whenever the recorder's batch size (EVAL_EVENTS_BATCH_SIZE's default) fills. The
 * CPU counted is every thread of this process but the JavaScript one (which only waits here):
 * the insert's own thread, chDB's pipeline threads and its background merges, read from /proc
 * by thread name. Three runs on fresh databases, the first the baseline:
 *
 *   landing table only   the line's parse alone: evaluation_requests without its views
 *   all views, no merges  the schema as deployed, background merges stopped: the insert's cost
 *   as deployed           the same with merges (what a sustained load pays, in part: merges of
 *                         older parts continue after the run)
 *
 * Each run checks that the rows stored are the rows sent. chDB only: on a ClickHouse server
 * (CLICKHOUSE_URL) the CPU is the server's, not this process's.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openAnalytics, type Analytics, type TabSeparatedInsert } from '../analytics/client';
import { migrateAnalytics } from '../analytics/migrate';
import { EvaluationRecorder } from '../api/features/evaluation/recorder';
import type { EvaluationResult } from '../api/features/evaluation/engine/index';
import { createLogger } from '../api/infra/logger';

const RATE = Number(process.env.BENCH_RATE ?? 18_000);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 16);
/** EVAL_EVENTS_BATCH_SIZE's default (api/config.ts): rows per insert. */
const BATCH_ROWS = 250_000;
const FLAGS = 5;
const USERS = 100_000;

interface Run {
  name: string;
  /** Statements run after the schema, before the inserts. */
  prepare: string[];
  /** Whether evaluation_events must hold every row sent afterwards. */
  stores: boolean;
}

const RUNS: Run[] = [
  { name: 'landing table only (parse)', prepare: ['DROP VIEW evaluation_minutes_mv', 'DROP VIEW evaluation_requests_mv'], stores: false },
  { name: 'all views, no merges', prepare: ['SYSTEM STOP MERGES evaluation_events', 'SYSTEM STOP MERGES evaluation_minutes'], stores: true },
  { name: 'as deployed (with merges)', prepare: [], stores: true },
];

/** The batches the recorder hands to ClickHouse for `requests` new-user requests of five flags. */
async function recordedBatches(requests: number, startMs: number): Promise<TabSeparatedInsert[]> {
  const batches: TabSeparatedInsert[] = [];
  const capture = { insertTabSeparated: async (insert: TabSeparatedInsert) => void batches.push(insert) } as unknown as Analytics;
  const recorder = new EvaluationRecorder({
    analytics: capture,
    logger: createLogger('warn'),
    batchSize: BATCH_ROWS,
    flushIntervalMs: 3_600_000,
    maxBuffered: requests * FLAGS,
    maxAttempts: 1,
    retryBaseMs: 1,
  });
  // Rollout flags as the bulk-users row serves them: a user is in or out of each rollout.
  const results = (user: number): EvaluationResult[] =>
    Array.from({ length: FLAGS }, (_, i) => {
      const inside = (user >> i) % 2 === 1;
      return { flagKey: `bulk-${i}`, value: inside, variant: inside ? 'on' : 'off', reason: 'TARGETING_MATCH', ruleId: 'rollout', rolloutSide: inside ? 'in' : 'out' } satisfies Partial<EvaluationResult> as EvaluationResult;
    });
  for (let i = 0; i < requests; i++) {
    // Turns between slices, so the recorder's window closes and its lines are written as it goes.
    if (i % 10_000 === 0) await new Promise((resolve) => setImmediate(resolve));
    recorder.recordRequest({
      timestamp: startMs + Math.floor((i / RATE) * 1000),
      projectId: 'prj_0mih5ojsd5f3c1e4a9b2d7e6f',
      serviceId: 'svc_0mih5ojse8a1b2c3d4e5f6a7b',
      environment: 'production',
      source: 'ofrep',
      targetingKey: `user-${i % USERS}`,
      latencyMs: 0.05 + (i % 7) * 0.01,
      results: results(i),
    });
  }
  await recorder.close();
  return batches;
}

/** CPU seconds of this process's threads but the main one, by thread name (digits dropped). */
function threadCpu(): Map<string, number> {
  const byName = new Map<string, number>();
  const ticks = 100;
  for (const tid of fs.readdirSync('/proc/self/task')) {
    if (tid === String(process.pid)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/\d+$/, '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    byName.set(name, (byName.get(name) ?? 0) + (Number(fields[11]) + Number(fields[12])) / ticks);
  }
  return byName;
}

async function measure(run: Run, chdbPath: string, index: number): Promise<{ perTenK: number; threads: string; parts: number }> {
  const analytics = await openAnalytics({ database: `ingest_bench_${process.pid}_${index}`, chdbPath });
  await migrateAnalytics(analytics);
  for (const statement of run.prepare) await analytics.client.command({ query: statement });
  const requests = Math.round(RATE * DURATION_S);
  const batches = await recordedBatches(requests, Date.now());
  const before = threadCpu();
  const started = Date.now();
  // A batch goes when the recorder would have filled it at RATE.
  const batchEveryMs = (BATCH_ROWS / FLAGS / RATE) * 1000;
  for (const [i, batch] of batches.entries()) {
    const due = started + i * batchEveryMs;
    if (Date.now() < due) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
    await analytics.insertTabSeparated(batch);
  }
  const end = started + DURATION_S * 1000;
  if (Date.now() < end) await new Promise((resolve) => setTimeout(resolve, end - Date.now()));
  const after = threadCpu();
  let total = 0;
  const spent: [string, number][] = [];
  for (const [name, seconds] of after) {
    const delta = seconds - (before.get(name) ?? 0);
    total += delta;
    if (delta >= 0.01) spent.push([name, delta]);
  }
  if (run.stores) {
    const rs = await analytics.client.query({ query: 'SELECT sum(evaluations) AS n FROM evaluation_events', format: 'JSONEachRow' });
    const [row] = (await rs.json()) as { n: string }[];
    if (Number(row.n) !== requests * FLAGS) throw new Error(`${run.name}: evaluation_events holds ${row.n} evaluations, ${requests * FLAGS} were sent`);
  }
  const ps = await analytics.client.query({ query: "SELECT count() AS n FROM system.parts WHERE database = currentDatabase() AND table = 'evaluation_events' AND active", format: 'JSONEachRow' });
  const [parts] = (await ps.json()) as { n: string }[];
  await analytics.client.command({ query: `DROP DATABASE ${analytics.database}` });
  await analytics.close();
  spent.sort((a, b) => b[1] - a[1]);
  return { perTenK: (total / requests) * 1e4, threads: spent.map(([name, s]) => `${name} ${s.toFixed(2)}`).join(', '), parts: Number(parts.n) };
}

async function main() {
  if (process.env.CLICKHOUSE_URL) throw new Error('bench:ingest measures chDB in this process: unset CLICKHOUSE_URL');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-ingest-bench-'));
  console.log(
    `bench:ingest  chDB CPU per 10,000 new-user requests (${FLAGS} flags a line), ${RATE.toLocaleString('en-US')} requests/s for ${DURATION_S} s, ` +
      `inserts of ${BATCH_ROWS.toLocaleString('en-US')} rows; every thread but JavaScript's, from /proc (node ${process.version})`,
  );
  console.log('');
  console.log('| run | CPU-s per 10k requests | vs landing table only | evaluation_events parts after | CPU-s by thread |');
  console.log('|---|---:|---:|---:|---|');
  let baseline: number | undefined;
  for (const [i, run] of RUNS.entries()) {
    const { perTenK, threads, parts } = await measure(run, path.join(dir, 'chdb'), i);
    baseline ??= perTenK;
    console.log(`| ${run.name} | ${perTenK.toFixed(4)} | ${(perTenK / baseline).toFixed(2)}x | ${run.stores ? parts : '-'} | ${threads} |`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
