import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Analytics } from '../../../analytics/client';
import type { ProjectAccess } from '../../auth/access';
import type { Authenticator } from '../../auth/authenticator';
import type { JwtCodec } from '../../auth/jwt';
import type { Config } from '../../config';
import type { OpenApiCatalog } from '../../http/openapi';
import type { AnyRoute } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { Check } from '../../lib/health/routes';
import type { Metrics } from '../../lib/metrics/metrics';
import { CREDENTIAL_CACHE_TTL_MS } from '../tokens/wiring';
import { DemoServiceRegistry, EvaluationAccess, type DemoServices } from './access';
import { connectJsonRoutes, connectRoutes } from './connect-routes';
import { ContextRing, type ContextEntry } from './contexts';
import { compileFlag, evaluate } from './engine/index';
import { EvaluationLog } from './evaluation-log';
import { createLeanHandler } from './lean';
import { LocalRateLimiter } from './local-rate-limiter';
import { ofrepEvaluateRoutes, ofrepRoutes } from './ofrep';
import { ChannelTokens, IssuerStore, IssuerWatch } from './ofrep-channel';
import { FlagConfigWaiters, ofrepEventsRoute } from './ofrep-events';
import type { EvaluationRecorder } from './recorder';
import { restBatchRoute, restEvaluateRoute } from './rest';
import { evaluationControlRoutes, evaluationRoutes } from './routes';
import { EvaluationService } from './service';
import { watchSnapshots } from './snapshot-health';
import { SnapshotStore } from './snapshots';
import { sseRoutes } from './sse';
import { EvaluationStore } from './store';
import { StreamLimits } from './stream-limits';
import { StreamHub } from './streams';

export interface EvaluationFeatureDeps {
  config: Config;
  sql: Sql;
  cache: Cache;
  analytics: Analytics;
  logger: Logger;
  authenticator: Authenticator;
  /** Signs the channel tokens of OFREP event streams (with the project-JWT key, under their own audience). */
  jwt: JwtCodec;
  projectAccess: ProjectAccess;
  openapi: OpenApiCatalog;
  /** The evaluation_events writer: the analytics writer owns it (starts, flushes, closes it with every table). */
  recorder: EvaluationRecorder;
  /** Evaluations, streams, snapshots and lean-path requests are counted here. */
  metrics: Metrics;
  /** Which services are demo services; DEMO_SERVICE_IDS alone when not given. */
  demo?: DemoServices;
  /** Told every context the ring takes (simulate's recent-contexts warehouse). */
  recordContext?: (entry: ContextEntry) => void;
}

/** Requests the lean path takes before Express sees them; returns false for everything else. */
export type FrontHandler = (req: IncomingMessage, res: ServerResponse) => boolean;

export interface EvaluationFeature {
  /** Evaluation and SDK routes (both listeners) and the dashboard-only ones (control). */
  routes: { data: AnyRoute[]; control: AnyRoute[] };
  /** The lean hot path, put in front of Express on the control and data listeners. */
  front: FrontHandler;
  snapshots: SnapshotStore;
  /** Evaluation over the snapshots, for other protocols' adapters (flagd's). */
  evaluation: EvaluationService;
  /** The hot-path rate-limit counters (per IP, per token, per service), shared by every adapter. */
  limiter: LocalRateLimiter;
  /** Open-stream caps of this process, shared by every streaming protocol. */
  streamLimits: StreamLimits;
  /**
   * The context ring (docs/data-plane.md#context-ring-get-apicontexts-control-plane); simulate
   * replays it.
   */
  contexts: ContextRing;
  demo: DemoServices;
  recorder: EvaluationRecorder;
  hub: StreamHub;
  /** /api/health/evaluation contributions. */
  checks(): Promise<Record<string, Check>>;
  /** Ends open streams: run before listeners drain, so shutdown does not wait for SSE clients. */
  drain(): Promise<void>;
  /** Stops timers and subscriptions: run after listeners drained (the analytics writer flushes the events). */
  stop(): Promise<void>;
}

/**
 * The evaluation data plane (docs/data-plane.md, docs/evaluation.md): snapshots kept
 * current from the flag-change bus, the lean path, REST, OFREP, Connect and gRPC-Web, SSE
 * streams, the context ring and /api/sdk-config.
 */
export async function createEvaluationFeature(deps: EvaluationFeatureDeps): Promise<EvaluationFeature> {
  const { config, logger } = deps;
  // The reconcile repairs bus messages lost between processes. One process holding both the
  // database (PGlite) and the bus (in memory) loses none, so it does not read every flag's stamp
  // each interval for nothing (docs/operations.md#resource-use-at-idle).
  const busLosesNothing = !config.DATABASE_URL && deps.cache.backend === 'memory';
  const reconcileIntervalMs = busLosesNothing ? 0 : config.EVAL_SNAPSHOT_RECONCILE_MS;
  const snapshots = new SnapshotStore({ sql: deps.sql, store: new EvaluationStore(), cache: deps.cache, logger, reconcileIntervalMs });
  const demo = deps.demo ?? new DemoServiceRegistry(config.DEMO_SERVICE_IDS);
  const access = new EvaluationAccess({ snapshots, demo, roleOf: (userId, projectId) => deps.projectAccess.roleOf(userId, projectId) });
  const limiter = new LocalRateLimiter({ cache: deps.cache, windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS, syncIntervalMs: config.EVAL_RATE_LIMIT_SYNC_MS, logger });
  const { recorder } = deps;
  const contexts = new ContextRing(config.CONTEXT_RING_SIZE, 4 * 1024 * 1024, deps.recordContext);
  const evaluation = new EvaluationService({
    access,
    recorder,
    contexts,
    limiter,
    metrics: deps.metrics.evaluations,
    perServiceLimit: config.RATE_LIMIT_PER_SERVICE,
    workBudget: { conditions: config.EVAL_BUDGET_CONDITIONS, regexMs: config.EVAL_BUDGET_REGEX_MS },
  });
  const hub = new StreamHub(
    snapshots,
    { heartbeatMs: config.STREAM_HEARTBEAT_MS, replayMaxEvents: config.STREAM_REPLAY_MAX_EVENTS, replayMaxAgeMs: config.STREAM_REPLAY_MAX_AGE_MS },
    logger,
  );
  // One count for the process: SSE on both listeners and the Connect / gRPC-Web EventStream.
  const streamLimits = new StreamLimits({ perIp: config.STREAM_MAX_PER_IP, perCredential: config.STREAM_MAX_PER_CREDENTIAL, perService: config.STREAM_MAX_PER_SERVICE }, deps.metrics.streams);
  const streamClient = { maxBufferedBytes: config.STREAM_MAX_BUFFERED_BYTES, stallTimeoutMs: config.STREAM_STALL_TIMEOUT_MS };
  // OFREP event streams: channel tokens, the watch that ends a revoked token's streams (within a
  // credential-cache TTL, docs/limits.md), and bulk re-fetches waiting for an announced change.
  const channels = new ChannelTokens(deps.jwt, `${deps.jwt.audience}/ofrep-events`);
  const issuers = new IssuerWatch({ sql: deps.sql, store: new IssuerStore(), intervalMs: CREDENTIAL_CACHE_TTL_MS, logger });
  const waiters = new FlagConfigWaiters(snapshots);
  await snapshots.start();
  watchSnapshots(deps.metrics, snapshots);
  limiter.start();
  hub.start();
  issuers.start();

  const shared: AnyRoute[] = [
    ...evaluationRoutes({
      evaluation,
      publicDataUrl: config.PUBLIC_DATA_URL,
      limits: { perIp: config.RATE_LIMIT_PER_IP, perToken: config.RATE_LIMIT_PER_TOKEN, perService: config.RATE_LIMIT_PER_SERVICE, windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS },
    }),
    ...connectJsonRoutes({ evaluation }),
    ...connectRoutes({ evaluation, hub, streamLimits, streamClient, logger }),
    ...ofrepRoutes(),
  ];
  const control = [
    ...shared,
    ...evaluationControlRoutes({ evaluation, log: new EvaluationLog(deps.analytics, recorder), contexts }),
  ];
  // Served by the lean path from the same declarations the OpenAPI document is made of.
  const lean = [
    restEvaluateRoute(evaluation),
    restBatchRoute(evaluation),
    ...ofrepEvaluateRoutes({ evaluation, channels, waiters, publicDataUrl: config.PUBLIC_DATA_URL }),
    ofrepEventsRoute({ evaluation, snapshots, hub, channels, issuers, streamLimits, streamClient, trustProxy: config.TRUST_PROXY }),
    ...sseRoutes({ evaluation, hub, streamLimits, streamClient, trustProxy: config.TRUST_PROXY }),
  ];
  for (const route of lean) deps.openapi.register(route);
  const front = createLeanHandler(
    { authenticator: deps.authenticator, limiter, perIpLimit: config.RATE_LIMIT_PER_IP, perTokenLimit: config.RATE_LIMIT_PER_TOKEN, trustProxy: config.TRUST_PROXY, logger, metrics: deps.metrics.http },
    lean,
  );

  const probe = compileFlag({ key: 'health-probe', type: 'boolean', enabled: true, defaultValue: false, variants: [], targeting: [] });

  return {
    routes: { data: shared, control },
    front,
    snapshots,
    evaluation,
    limiter,
    streamLimits,
    contexts,
    demo,
    recorder,
    hub,
    async checks() {
      const t0 = performance.now();
      const result = evaluate(probe, 'health-probe', { targetingKey: 'probe' }, true);
      const engine: Check = { working: result.value === false && result.reason === 'DEFAULT', testTime: ms(performance.now() - t0) };
      const s = snapshots.snapshotStats();
      const snapshotCheck = { working: s.ready, testTime: 0, ...s } as Check;
      const r = recorder.stats();
      const recorderCheck = {
        working: r.healthy,
        testTime: 0,
        ...r,
        ...(!r.healthy && r.lastError ? { error: r.lastError } : {}),
      } as Check;
      const streams = { working: !hub.isClosed, testTime: 0, open: hub.size } as Check;
      return { engine, snapshots: snapshotCheck, evaluationEvents: recorderCheck, streams };
    },
    async drain() {
      hub.close();
    },
    async stop() {
      hub.close();
      await issuers.stop();
      await snapshots.stop();
      await limiter.stop();
    },
  };
}

const ms = (n: number) => Math.round(n * 1000) / 1000;
