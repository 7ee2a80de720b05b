import type { Sql } from 'postgres';
import type { Analytics } from '../../../analytics/client';
import type { AnalyticsSink } from '../../../analytics/rows';
import { AnalyticsWriter } from '../../../analytics/writer';
import type { ProjectAccess } from '../../auth/access';
import type { Authenticator } from '../../auth/authenticator';
import type { Config } from '../../config';
import type { ListenerRoutes } from '../../http/route';
import type { OutboundClient } from '../../http/outbound';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import { EvaluationRecorder } from '../evaluation/recorder';
import type { SnapshotStore } from '../evaluation/snapshots';
import { analyticsExportRoutes } from './export-routes';
import type { DeliveryQueue } from '../webhooks/deliveries';
import { ingestRoutes } from './ingest-routes';
import { analyticsQueryRoutes } from './query-routes';

/** Attempts per batch before it is dropped (and counted), and the first retry's delay (doubling). */
const WRITER_ATTEMPTS = 4;
const WRITER_RETRY_BASE_MS = 500;

/**
 * The one batched writer of the process: evaluation events with their own settings
 * (the hot table), every other table with ANALYTICS_*. Created before the evaluation feature,
 * which records into `evaluations`; started here, closed by the analytics feature's stop().
 */
export function createAnalyticsWriter(deps: { config: Config; analytics: Analytics; logger: Logger; instanceId: string }): {
  writer: AnalyticsWriter;
  evaluations: EvaluationRecorder;
} {
  const { config, analytics, logger, instanceId } = deps;
  const evaluations = new EvaluationRecorder({
    analytics,
    logger,
    instanceId,
    batchSize: config.EVAL_EVENTS_BATCH_SIZE,
    flushIntervalMs: config.EVAL_EVENTS_FLUSH_MS,
    maxBuffered: config.EVAL_EVENTS_MAX_BUFFERED,
    foldMs: config.EVAL_EVENTS_FOLD_MS,
    maxAttempts: WRITER_ATTEMPTS,
    retryBaseMs: WRITER_RETRY_BASE_MS,
  });
  const writer = new AnalyticsWriter({
    analytics,
    logger,
    instanceId,
    batchSize: config.ANALYTICS_BATCH_SIZE,
    flushIntervalMs: config.ANALYTICS_FLUSH_MS,
    maxBuffered: config.ANALYTICS_MAX_BUFFERED,
    maxAttempts: WRITER_ATTEMPTS,
    retryBaseMs: WRITER_RETRY_BASE_MS,
    alongside: [evaluations],
  });
  writer.start();
  return { writer, evaluations };
}

export interface AnalyticsFeatureDeps {
  config: Config;
  sql: Sql;
  cache: Cache;
  analytics: Analytics;
  /** createAnalyticsWriter's: producers record into it as `sink`. */
  writer: AnalyticsWriter;
  /** createAnalyticsWriter's evaluation events writer: OpenTelemetry exposures are recorded into it. */
  evaluations: EvaluationRecorder;
  /** The evaluation feature's snapshots, where this process evaluates: OpenTelemetry exposures are placed on rollouts. */
  snapshots?: SnapshotStore;
  access: ProjectAccess;
  /** Resolves browser ingestion's X-Write-Token (a project API token outside Authorization). */
  authenticator: Authenticator;
  outbound: OutboundClient;
  /** The outbound delivery lanes: analytics export sends its chunks through them. */
  deliveries: DeliveryQueue;
  logger: Logger;
}

export interface AnalyticsFeature {
  routes: ListenerRoutes;
  /** Where producers record rows (the analytics writer). */
  sink: AnalyticsSink;
  /** Flushes every buffered analytics row before the process exits. */
  stop(): Promise<void>;
}

/**
 * The analytics warehouse: ingestion routes on each listener, and the queries and exports
 * analysts and SREs read; producers record into the one batched writer (createAnalyticsWriter).
 */
export function createAnalyticsFeature(deps: AnalyticsFeatureDeps): AnalyticsFeature {
  // What ingestion routes record into: `record` answers false when the memory bound refuses a row (503).
  const sink: AnalyticsSink = deps.writer;
  const ingestion = ingestRoutes({ ...deps, sink });
  return {
    routes: {
      control: [...analyticsQueryRoutes(deps), ...analyticsExportRoutes(deps), ...ingestion.control],
      data: ingestion.data,
      ingest: ingestion.ingest,
    },
    sink,
    async stop() {
      await deps.writer.close();
    },
  };
}
