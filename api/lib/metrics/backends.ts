import { setTimeout as sleep } from 'node:timers/promises';
import type { AnalyticsWriter } from '../../../analytics/writer';
import type { WorkerHandle } from '../../../activities/worker';
import { poolState, type Sql } from '../../infra/postgres';
import type { Temporal } from '../../infra/temporal';
import type { OutboxRelay } from '../outbox/relay';
import type { Metrics } from './metrics';

/**
 * Gauges and counters read at scrape time from the backends' clients
 * (docs/operations.md#metrics). Those that ask a backend do it at most once at a time and for
 * at most PROBE_TIMEOUT_MS, so a scrape during an outage answers at once with what is known.
 */

const PROBE_TIMEOUT_MS = 2_000;

/**
 * Runs `read` for the scrape: the gauges of one scrape share the read in flight, a new one starts
 * only when none runs, and the scrape waits for it at most PROBE_TIMEOUT_MS (undefined then, as
 * when it failed).
 */
function boundedProbe<T>(read: () => Promise<T>): () => Promise<T | undefined> {
  let running: Promise<T | undefined> | undefined;
  return () => {
    running ??= read()
      .catch(() => undefined)
      .finally(() => {
        running = undefined;
      });
    return Promise.race([running, sleep(PROBE_TIMEOUT_MS, undefined, { ref: false })]);
  };
}

/** Rows, batches, drops and buffered bytes of every analytics table's writer. */
export function watchAnalyticsWriter(metrics: Metrics, writer: AnalyticsWriter): void {
  const perTable = (pick: (s: ReturnType<AnalyticsWriter['stats']>[string]) => number) => () =>
    Object.entries(writer.stats()).map(([table, stats]) => [{ table }, pick(stats)] as [{ table: string }, number]);
  metrics.counterOf({ name: 'flagship_analytics_rows_written_total', help: 'Analytics rows inserted, by table', labelNames: ['table'], read: perTable((s) => s.written) });
  metrics.counterOf({ name: 'flagship_analytics_batches_total', help: 'Analytics inserts that succeeded, by table', labelNames: ['table'], read: perTable((s) => s.batches) });
  metrics.counterOf({
    name: 'flagship_analytics_rows_dropped_total',
    help: 'Analytics rows given up on (buffer full, or a batch that failed every attempt), by table',
    labelNames: ['table'],
    read: perTable((s) => s.dropped),
  });
  metrics.counterOf({ name: 'flagship_analytics_failed_batches_total', help: 'Analytics batches dropped after every attempt failed, by table', labelNames: ['table'], read: perTable((s) => s.failedBatches) });
  metrics.gauge({
    name: 'flagship_analytics_buffered_rows',
    help: 'Analytics rows waiting to be inserted, by table',
    labelNames: ['table'],
    collect: (set) => {
      for (const [table, s] of Object.entries(writer.stats())) set({ table }, s.buffered + s.inFlight);
    },
  });
  metrics.gauge({
    name: 'flagship_analytics_buffer_bytes',
    help: 'Bytes of serialized analytics rows waiting to be inserted, by table',
    labelNames: ['table'],
    collect: (set) => {
      for (const [table, s] of Object.entries(writer.stats())) set({ table }, s.bufferedBytes);
    },
  });
}

/** Pending events and the age of the oldest per outbox consumer (every relay's, from the table), and this relay's handled and failed counts. */
export function watchOutbox(metrics: Metrics, outbox: OutboxRelay): void {
  const backlog = boundedProbe(() => outbox.backlog());
  metrics.gauge({
    name: 'flagship_outbox_pending_events',
    help: 'Committed flag changes a consumer has not handled yet, by consumer',
    labelNames: ['consumer'],
    collect: async (set) => {
      for (const row of (await backlog()) ?? []) set({ consumer: row.consumer }, row.pending);
    },
  });
  metrics.gauge({
    name: 'flagship_outbox_lag_seconds',
    help: 'Age of the oldest change a consumer has not handled yet (0 when none waits), by consumer',
    labelNames: ['consumer'],
    collect: async (set) => {
      for (const row of (await backlog()) ?? []) set({ consumer: row.consumer }, (row.oldestPendingAgeMs ?? 0) / 1000);
    },
  });
  const counts = (pick: (s: { handled: number; failures: number }) => number) => () =>
    outbox.consumerNames.map((consumer) => [{ consumer }, pick(outbox.stats().consumers[consumer] ?? { handled: 0, failures: 0 })] as [{ consumer: string }, number]);
  metrics.counterOf({ name: 'flagship_outbox_events_handled_total', help: "Outbox events this process's relay handled, by consumer", labelNames: ['consumer'], read: counts((s) => s.handled) });
  metrics.counterOf({ name: 'flagship_outbox_failures_total', help: "Outbox handling attempts that failed in this process's relay, by consumer", labelNames: ['consumer'], read: counts((s) => s.failures) });
}

/**
 * This process's Postgres pool as the driver holds it (connections in use, idle and connecting,
 * queries waiting for one), and whether a probe query answered.
 */
export function watchPostgres(metrics: Metrics, opts: { sql: Sql; poolSize: number }): void {
  const probe = boundedProbe(() => opts.sql`SELECT 1`);
  metrics.gauge({
    name: 'flagship_postgres_up',
    help: '1 when a probe query answered within 2 s at the last scrape, else 0',
    collect: async (set) => {
      set({}, (await probe()) === undefined ? 0 : 1);
    },
  });
  metrics.gauge({ name: 'flagship_postgres_pool_max', help: 'Connections the pool may open (DATABASE_POOL_SIZE)', collect: (set) => set({}, opts.poolSize) });
  metrics.gauge({
    name: 'flagship_postgres_pool_connections',
    help: "This process's pool connections by state: in_use (connecting for a query, running queries or holding a transaction) or idle",
    labelNames: ['state'],
    collect: (set) => {
      const pool = poolState(opts.sql);
      set({ state: 'in_use' }, pool.inUse);
      set({ state: 'idle' }, pool.idle);
    },
  });
  metrics.gauge({
    name: 'flagship_postgres_pool_waiting',
    help: 'Queries waiting for a pool connection (none given yet, or queued behind another query on a busy one)',
    collect: (set) => set({}, poolState(opts.sql).waiting),
  });
}

/** The worker's task slots, and failed workflow executions on its task queue (Temporal's visibility, namespace-wide). */
export function watchWorker(metrics: Metrics, worker: WorkerHandle, temporal: Temporal): void {
  metrics.gauge({
    name: 'flagship_temporal_worker_task_slots',
    help: "The worker's task slots, by kind (workflow, activity) and state (used, available)",
    labelNames: ['kind', 'state'],
    collect: (set) => {
      const slots = worker.slots();
      for (const kind of ['workflow', 'activity'] as const) {
        set({ kind, state: 'used' }, slots[kind].used);
        set({ kind, state: 'available' }, slots.running ? slots[kind].max - slots[kind].used : 0);
      }
    },
  });
  const failed = boundedProbe(async () => {
    const queue = temporal.taskQueue.replace(/["\\]/g, '\\$&');
    const counted = await temporal.client.workflow.count(`TaskQueue = "${queue}" AND ExecutionStatus IN ("Failed", "TimedOut")`);
    return counted.count;
  });
  metrics.gauge({
    name: 'flagship_temporal_workflow_failures',
    help: 'Workflow executions of the task queue that failed or timed out, within the namespace retention (alert on increase)',
    collect: async (set) => {
      const count = await failed();
      if (count !== undefined) set({}, count);
    },
  });
}
