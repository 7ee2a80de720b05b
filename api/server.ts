import path from 'node:path';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestHandler } from 'express';
import { openAnalytics, type Analytics } from '../analytics/client';
import { applyAnalyticsRetention, migrateAnalytics, ownsAnalyticsSchema } from '../analytics/migrate';
import type { WorkerHandle } from '../activities/worker';
import { ProjectAccess } from './auth/access';
import { Authenticator } from './auth/authenticator';
import type { Config, Role } from './config';
import { createAccountFeature } from './features/accounts/wiring';
import { createAlertChannelFeature } from './features/alert-channels/wiring';
import { createAnalyticsFeature, createAnalyticsWriter } from './features/analytics/wiring';
import { createAuditFeature } from './features/audit/wiring';
import { createCanaryFeature } from './features/canary/wiring';
import { PrometheusGuards } from './lib/release-safety/prometheus-guards';
import { createCliLoginFeature } from './features/cli-login/wiring';
import { createCohortFeature } from './features/cohorts/wiring';
import { createDemoFeature } from './features/demo/wiring';
import type { DemoServiceRegistry } from './features/demo/registry';
import { createEvaluationFeature, type EvaluationFeature, type FrontHandler } from './features/evaluation/wiring';
import { snapshotReadiness } from './features/evaluation/snapshot-health';
import { createExperimentFeature } from './features/experiments/wiring';
import { createFlagdFeature, type FlagdFeature, type FlagdListeners } from './features/flagd/wiring';
import { createExplainFeature } from './features/explain/wiring';
import { createFlagFeature } from './features/flags/wiring';
import type { FlagService } from './features/flags/service';
import { createGuardrailFeature } from './features/guardrails/wiring';
import type { GuardrailChecker } from './features/guardrails/checker';
import { createInsightFeature } from './features/insights/wiring';
import { createInvitationFeature } from './features/invitations/wiring';
import { createMemberFeature } from './features/members/wiring';
import { createOAuthFeature } from './features/oauth/wiring';
import { createOrgFeature } from './features/orgs/wiring';
import { createPersonalTokenFeature } from './features/personal-tokens/wiring';
import { createProjectFeature } from './features/projects/wiring';
import { createSearchFeature } from './features/search/wiring';
import { createServiceFeature } from './features/services/wiring';
import { sdkEndpointRoutes, type ListenerUrls } from './features/sdk/routes';
import { createSimulateFeature } from './features/simulate/wiring';
import { createTokenFeature } from './features/tokens/wiring';
import { createTriggerFeature } from './features/triggers/wiring';
import { createWatchFeature } from './features/watch/wiring';
import { createWebhookFeature } from './features/webhooks/wiring';
import type { CanaryActivityDeps } from '../activities/canary';
import type { BanditActivityDeps } from '../activities/bandit';
import { consoleSite } from './lib/console/site';
import { healthRoutes } from './lib/health/routes';
import { startManagementListener, type ManagementListener } from './lib/management/listener';
import { Readiness } from './lib/management/readiness';
import { watchAnalyticsWriter, watchOutbox, watchPostgres, watchWorker } from './lib/metrics/backends';
import { Metrics } from './lib/metrics/metrics';
import { MailQueue } from './lib/mail/mail-queue';
import { ChangeRequestAlerts } from './features/change-requests/alerts';
import { ChangeGate } from './features/change-requests/gate';
import type { ChangeRequestService } from './features/change-requests/service';
import { createChangeRequestFeature } from './features/change-requests/wiring';
import { OutboxRelay } from './lib/outbox/relay';
import { openApiRoutes } from './http/openapi-route';
import { createHttpApp } from './http/app';
import { closeIdleKeepAlive } from './http/idle-connections';
import { OpenApiCatalog } from './http/openapi';
import { OutboundClient } from './http/outbound';
import type { AnalyticsWriter } from '../analytics/writer';
import { RateLimiter } from './http/rate-limit';
import type { AnyRoute, Listener, ListenerRoutes } from './http/route';
import { createCache, type Cache } from './infra/cache';
import { createLogger, type Logger } from './infra/logger';
import { migrate } from './infra/migrate';
import { projectPath } from './infra/paths';
import { openDatabase, type Database, type Sql } from './infra/postgres';
import { ReadRouting } from './infra/read-replica';
import { detachedTemporal, openTemporal, type Temporal } from './infra/temporal';
import type { Tracing } from './infra/tracing';

const APP_VERSION: string = JSON.parse(fs.readFileSync(projectPath('package.json'), 'utf8')).version;
/** The outbox relay's fallback poll on PGlite (docs/operations.md#resource-use-at-idle). */
const PGLITE_OUTBOX_POLL_MS = 60_000;

/** Something that must run when the process stops (flush a buffer, stop a relay …), in reverse order. */
export type ShutdownHook = () => Promise<void>;

export interface Platform {
  config: Config;
  logger: Logger;
  db: Database;
  cache: Cache;
  analytics: Analytics;
  temporal: Temporal;
  rateLimiter: RateLimiter;
  authenticator: Authenticator;
  /** The one authorization gate (api/auth/access.ts): route access rules and every project check. */
  access: ProjectAccess;
  routes: Record<'control' | 'data' | 'ingest', AnyRoute[]>;
  openapi: OpenApiCatalog;
  instanceId: string;
  /** The one mutation path for flags (routes, bulk, triggers, rollback, canary, demo writes). */
  flagService: FlagService;
  /** Runs each consumer of committed flag changes (the bus publish, then the registered ones) in its own loop. */
  outbox: OutboxRelay;
  /** The guardrail watch's check, run by this process's worker. */
  guardrail: GuardrailChecker;
  /** What this process's worker runs the canary pipeline activities with. */
  canary: CanaryActivityDeps;
  /** What this process's worker runs the bandit reallocation activity with. */
  bandit: BanditActivityDeps;
  /** What this process's worker runs the scheduled apply of change requests with. */
  changeRequests: ChangeRequestService;
  /**
   * Which services are public demo services (docs/api-reference.md#demo-service): isDemoService /
   * demoServiceIds (also isDemo / list).
   */
  demo: DemoServiceRegistry;
  /** The SSRF-guarded HTTP client for every user-supplied URL (webhooks, alert channels, export). */
  outbound: OutboundClient;
  /** This process's Prometheus metrics (docs/operations.md#metrics), served by the management listener. */
  metrics: Metrics;
  /** What /readyz answers (docs/operations.md#readiness). */
  readiness: Readiness;
  /** The read replica's routing (DATABASE_READ_URL, docs/operations.md#read-replica), used by the control plane's routes. */
  reads?: ReadRouting;
  /** Every analytics table's batched writer (its `flush` writes what producers recorded, e.g. before a test reads). */
  analyticsWriter: AnalyticsWriter;
  /** Evaluation data plane (snapshots, streams, evaluation events); absent on worker/ingest-only processes. */
  evaluation?: EvaluationFeature;
  /** flagd's protocols (docs/local-evaluation.md): on data-plane processes with FLAGD_ENABLED. */
  flagd?: FlagdFeature;
  /** This process's listeners once startRoles bound them (GET /api/projects/{id}/sdk-endpoints reads them). */
  listenerUrls: ListenerUrls;
  /** Handlers that see a listener's requests before Express (the evaluation lean path); false = not mine. */
  front: Partial<Record<'control' | 'data' | 'ingest', FrontHandler>>;
  /** The web console (dist/web) on the control plane; absent when it is not built or not a control process. */
  consoleSite?: RequestHandler;
  /** Tracing, when an OTLP endpoint is configured (docs/operations.md#tracing); started by api/main.ts. */
  tracing?: Tracing;
  onShutdown(hook: ShutdownHook): void;
  /** Runs before listeners drain (end long-lived streams so draining does not wait for their clients). */
  onDrain(hook: ShutdownHook): void;
  /** Runs the onDrain hooks once. */
  beforeDrain(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The wiring root: opens every backend for the configured profile, runs migrations, builds
 * every feature with its dependencies passed in, and returns the route tables per listener.
 * Tests and the embedded profile call this exactly like production does.
 */
export async function createPlatform(config: Config, logger = createLogger(config.LOG_LEVEL), tracing?: Tracing): Promise<Platform> {
  const hooks: ShutdownHook[] = [];
  const onShutdown = (hook: ShutdownHook) => hooks.push(hook);
  const drainHooks: ShutdownHook[] = [];
  const instanceId = randomUUID();
  const metrics = new Metrics({ version: APP_VERSION, commit: config.APP_COMMIT });
  const readiness = new Readiness();
  metrics.gauge({ name: 'flagship_ready', help: '1 while /readyz answers 200, else 0', collect: (set) => set({}, readiness.state().ready ? 1 : 0) });
  try {
    const db = await openDatabase({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, replyTimeoutMs: config.DATABASE_REPLY_TIMEOUT_MS, connectTimeoutMs: config.BACKEND_TIMEOUT_MS, dataDir: config.dataDir, applicationName: `flags ${instanceId}`, logger });
    onShutdown(() => db.close());
    watchPostgres(metrics, { sql: db.sql, poolSize: db.backend === 'pglite' ? 1 : config.DATABASE_POOL_SIZE });
    const applied = await migrate(db.sql);
    if (applied.length) logger.info({ applied }, 'database migrations applied');

    const cache = createCache(config.REDIS_URL, config.REDIS_KEY_PREFIX, config.BACKEND_TIMEOUT_MS);
    onShutdown(() => cache.close());
    const reads = config.DATABASE_READ_URL && config.ROLES.includes('control') ? await openReadReplica(config, { primary: db.sql, cache, logger, instanceId, onShutdown }) : undefined;

    // Only the schema's owners run analytics DDL; data-plane and ingest processes only write.
    const ownsSchema = ownsAnalyticsSchema(config.ROLES, config.CLICKHOUSE_URL);
    const analytics = await openAnalytics({ url: config.CLICKHOUSE_URL, database: config.CLICKHOUSE_DATABASE, chdbPath: config.CHDB_PATH ?? path.join(config.dataDir, 'chdb'), cluster: config.CLICKHOUSE_CLUSTER, ownsSchema });
    onShutdown(() => analytics.close());
    if (ownsSchema) {
      const analyticsApplied = await migrateAnalytics(analytics);
      if (analyticsApplied.length) logger.info({ applied: analyticsApplied }, 'analytics migrations applied');
      const retention = { raw: config.ANALYTICS_RETENTION_DAYS, rollup: config.ANALYTICS_ROLLUP_RETENTION_DAYS };
      const retentionChanged = await applyAnalyticsRetention(analytics, retention);
      if (retentionChanged.length) logger.info({ tables: retentionChanged, retention }, 'analytics retention changed');
    }

    // Only the control plane (starts workflows) and the worker (runs them) talk to Temporal.
    const usesTemporal = config.ROLES.includes('control') || config.ROLES.includes('worker');
    const temporalOptions = { namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE };
    const temporal = usesTemporal
      ? await openTemporal({ ...temporalOptions, address: config.TEMPORAL_ADDRESS, cliPath: config.TEMPORAL_CLI_PATH, dataDir: config.dataDir, callTimeoutMs: config.BACKEND_TIMEOUT_MS, logger, interceptors: tracing?.temporalClientInterceptors })
      : detachedTemporal(temporalOptions);
    onShutdown(() => temporal.close());

    const publicBaseUrl = config.PUBLIC_BASE_URL ?? `http://${config.HOST}:${config.PORT}`;
    // Filled in by startRoles once the listeners are bound (a port of 0 is only known then).
    const listenerUrls: ListenerUrls = {};
    const sql = db.sql;
    const rateLimiter = new RateLimiter(cache, config.RATE_LIMIT_WINDOW_SECONDS);
    const mail = new MailQueue({ temporal, sql, logger });
    onShutdown(async () => mail.stop());
    // Mail stored while Temporal was away, or before a crash between storing and starting it.
    if (config.ROLES.includes('control')) void mail.startStored();
    const openapi = new OpenApiCatalog({ title: 'Feature Flag Service', version: APP_VERSION });
    // The one project gate every feature shares (api/auth/permissions.ts).
    const projectAccess = new ProjectAccess(sql, config.ADMIN_EMAILS);
    // Runs each consumer of committed flag changes (the bus publish, then the registered ones) in its own loop.
    // On Postgres other processes commit too: their notifications wake the relay. PGlite serves
    // this process alone, whose every commit nudges it, so its fallback poll can be rare.
    const outbox = new OutboxRelay({ sql, cache, logger, listen: db.backend === 'postgres', pollIntervalMs: db.backend === 'pglite' ? PGLITE_OUTBOX_POLL_MS : undefined });

    // Each feature's wiring builds it from the backends and the features before it. Credential
    // features register their bearer resolvers on the authenticator as they are built.
    const accounts = createAccountFeature({ config, sql, cache, mail, publicBaseUrl, logger });
    onShutdown(() => accounts.stop());
    const authenticator = new Authenticator(accounts.sessions);
    const orgs = createOrgFeature({ sql });
    const tokens = await createTokenFeature({ config, sql, cache, logger, authenticator });
    onShutdown(() => tokens.stop());
    const personalTokens = await createPersonalTokenFeature({ sql, cache, logger, authenticator });
    onShutdown(() => personalTokens.stop());
    const oauth = createOAuthFeature({ sql, logger, rateLimiter, authenticator, publicBaseUrl: config.PUBLIC_BASE_URL });
    const cliLogin = createCliLoginFeature({ tokens: personalTokens.tokens, rateLimiter });
    const invitations = createInvitationFeature({ sql, temporal, mail, publicBaseUrl, logger });
    // Guard servers are internal by nature: only the operator's allow-list may be queried.
    const guards = new PrometheusGuards({ allowedOrigins: config.PROMETHEUS_URL_ALLOWLIST, timeoutMs: config.PROMETHEUS_GUARD_TIMEOUT_MS });
    const projects = createProjectFeature({ sql, access: projectAccess, invitationTimers: invitations.timers, guards });
    const members = createMemberFeature({ sql, access: projectAccess });
    const services = createServiceFeature({ sql });
    const audit = createAuditFeature({ sql, access: projectAccess });
    const watch = createWatchFeature({ sql });
    const search = createSearchFeature({ sql });
    const changeGate = new ChangeGate({ sql, mail, logger });
    const flags = createFlagFeature({ sql, access: projectAccess, logger, gate: changeGate, afterCommit: () => outbox.nudge() });
    const cohorts = createCohortFeature({ sql, gate: changeGate, afterCommit: () => outbox.nudge() });
    const triggers = createTriggerFeature({ sql, cache, flags: flags.service, publicBaseUrl });
    // The SSRF-guarded client for every user-supplied URL (webhooks, alert channels, export).
    const outbound = new OutboundClient({ allowPrivateTargets: config.allowPrivateTargets });
    onShutdown(() => outbound.close());
    const webhooks = createWebhookFeature({ sql, cache, temporal, outbound });
    outbox.register(webhooks.consumer);
    const alertChannels = createAlertChannelFeature({ sql, deliveries: webhooks.deliveries, mail, outbound, sends: accounts.sends, publicBaseUrl, logger });
    const { notifyOrgAlertChannels } = alertChannels;
    const insights = createInsightFeature({ sql, analytics, flags: flags.service, notifyOrgAlertChannels, logger });
    const guardrails = createGuardrailFeature({ sql, temporal, insights: insights.insights, notifyOrgAlertChannels, guards, logger });
    outbox.register(guardrails.consumer);
    outbox.register(new ChangeRequestAlerts({ sql, notifyOrgAlertChannels }));
    const canary = createCanaryFeature({ sql, analytics, temporal, flags: flags.service, gate: changeGate, notifyOrgAlertChannels, guards, metrics: metrics.canary, logger });
    const experiments = createExperimentFeature({ sql, analytics, temporal, flags: flags.service, logger });
    const demo = await createDemoFeature({ config, sql, cache, logger, flags: flags.service });
    onShutdown(() => demo.stop());

    // The one batched analytics writer (evaluation events and every other table); the analytics
    // feature's stop() flushes and closes it.
    const { writer: analyticsWriter, evaluations: recorder } = createAnalyticsWriter({ config, analytics, logger, instanceId });
    watchAnalyticsWriter(metrics, analyticsWriter);
    const simulate = createSimulateFeature({ config, analytics, sink: analyticsWriter });
    // The evaluation data plane runs where flags are evaluated: control and data processes.
    const evaluation =
      config.ROLES.includes('control') || config.ROLES.includes('data')
        ? await createEvaluationFeature({ config, sql, cache, analytics, logger, authenticator, jwt: tokens.jwt, projectAccess, openapi, recorder, metrics, demo: demo.registry, recordContext: simulate.recordContext })
        : undefined;
    if (evaluation) {
      readiness.require('snapshots', snapshotReadiness(evaluation.snapshots));
      onShutdown(() => evaluation.stop());
      drainHooks.push(() => evaluation.drain());
    }
    const flagd = evaluation && config.ROLES.includes('data') && config.FLAGD_ENABLED ? createFlagdFeature({ config, logger, authenticator, evaluation }) : undefined;
    // Before the evaluation feature's drain: flagd streams end UNAVAILABLE, not with the hub.
    if (flagd) drainHooks.unshift(() => flagd.drain());
    // Explain and simulate read the evaluation feature's snapshots, so they exist wherever it does.
    const explain = evaluation && createExplainFeature({ snapshots: evaluation.snapshots });
    // A request's impact replays recent contexts where snapshots are loaded; a worker-only process applies without re-measuring.
    const simulation = evaluation && simulate.service(evaluation);
    const changeRequests = createChangeRequestFeature({ sql, flags: flags.service, gate: changeGate, temporal, mail, logger, impact: simulation ? (ref, after, size) => simulation.impact(ref, after, size) : undefined });
    const analyticsFeature = createAnalyticsFeature({ config, sql, cache, analytics, writer: analyticsWriter, evaluations: recorder, snapshots: evaluation?.snapshots, access: projectAccess, authenticator, outbound, deliveries: webhooks.deliveries, logger });
    onShutdown(() => analyticsFeature.stop());

    const health = healthRoutes({
      evaluationChecks: evaluation ? async () => ({ ...(await evaluation.checks()), ...(flagd ? { flagdStreams: flagd.check() } : {}) }) : undefined,
      analyticsWriterStats: () => analyticsWriter.stats(),
      cache,
      db,
      analytics,
      temporal,
      instanceId,
      version: { app: APP_VERSION, commit: config.APP_COMMIT, environment: config.NODE_ENV },
    });
    // Listed in mounting order: the first route that matches a request answers it.
    const served: ListenerRoutes[] = [
      { control: health, data: health, ingest: health },
      { control: openApiRoutes(openapi) },
      accounts.routes,
      orgs.routes,
      tokens.routes,
      personalTokens.routes,
      oauth.routes,
      cliLogin.routes,
      // Before the flag routes: GET /api/flags/stream must not be taken for GET /api/flags/:key.
      evaluation?.routes ?? {},
      demo.routes,
      explain?.routes ?? {},
      evaluation ? simulate.routes(evaluation) : {},
      flags.routes(demo),
      projects.routes,
      members.routes,
      invitations.routes,
      services.routes,
      { control: sdkEndpointRoutes({ config, listenerUrls }) },
      audit.routes,
      watch.routes,
      search.routes,
      webhooks.routes,
      alertChannels.routes,
      triggers.routes,
      analyticsFeature.routes,
      insights.routes,
      canary.routes,
      experiments.routes,
      cohorts.routes,
      changeRequests.routes,
    ];
    const routesOf = (listener: Listener): AnyRoute[] => served.flatMap((routes) => routes[listener] ?? []);
    const control = routesOf('control');
    if (config.ROLES.includes('control')) {
      // The hosted MCP server's tools run the control routes above in-process, for the connector
      // token. Loaded only where it is served: the MCP SDK's schemas hold about 9 MB of heap.
      const { createMcpFeature } = await import('./features/mcp/wiring.js');
      const mcp = createMcpFeature({ routes: [...control], access: projectAccess, authenticator, rateLimiter, perTokenLimit: config.RATE_LIMIT_PER_TOKEN, publicBaseUrl: config.PUBLIC_BASE_URL, version: APP_VERSION });
      control.push(...(mcp.routes.control ?? []));
    }
    const data = routesOf('data');
    const ingest = routesOf('ingest');

    // Keep last: outbox consumers (outbox.register) must all be registered before the relay starts.
    // Every control replica runs a relay; they share the work safely (SKIP LOCKED leases).
    if (config.ROLES.includes('control')) {
      outbox.start();
      onShutdown(() => outbox.stop());
      watchOutbox(metrics, outbox);
    }

    return {
      config,
      logger,
      db,
      cache,
      analytics,
      temporal,
      rateLimiter,
      authenticator,
      access: projectAccess,
      openapi,
      instanceId,
      analyticsWriter,
      flagService: flags.service,
      outbox,
      guardrail: guardrails.checker,
      canary: canary.activityDeps,
      bandit: experiments.activityDeps,
      changeRequests: changeRequests.service,
      demo: demo.registry,
      outbound,
      metrics,
      readiness,
      reads,
      routes: { control, data, ingest },
      listenerUrls,
      evaluation,
      flagd,
      front: evaluation ? { control: evaluation.front, data: evaluation.front } : {},
      // The web console (web/README.md): its CSP lets it reach the public data plane.
      consoleSite: config.ROLES.includes('control')
        ? consoleSite({ dir: projectPath('dist', 'web'), connectSrc: [...(config.PUBLIC_DATA_URL ? [new URL(config.PUBLIC_DATA_URL).origin] : []), ...config.CONSOLE_CONNECT_SRC], logger })
        : undefined,
      tracing,
      onShutdown,
      onDrain: (hook: ShutdownHook) => drainHooks.push(hook),
      async beforeDrain() {
        for (const hook of drainHooks.splice(0)) {
          await hook().catch((error) => logger.error({ err: error }, 'drain step failed'));
        }
      },
      async close() {
        for (const hook of hooks.splice(0).reverse()) {
          await hook().catch((error) => logger.error({ err: error }, 'shutdown step failed'));
        }
      },
    };
  } catch (error) {
    for (const hook of hooks.reverse()) await hook().catch(() => undefined);
    throw error;
  }
}

export interface RunningListeners {
  /**
   * flagd and flagdSync: FLAGD_PORT and FLAGD_SYNC_PORT; management: MANAGEMENT_PORT, on every
   * role (with the port bound when 0 was asked).
   */
  urls: ListenerUrls;
  worker?: WorkerHandle;
  /** Stop accepting, let in-flight requests finish (bounded), then close the platform. */
  stop(): Promise<void>;
}

const LISTENER_PORT = { control: 'PORT', data: 'DATA_PORT', ingest: 'INGEST_PORT' } as const;

export async function startRoles(platform: Platform, roles: readonly Role[]): Promise<RunningListeners> {
  const { config, logger } = platform;
  const servers: http.Server[] = [];
  const urls = platform.listenerUrls;
  let worker: WorkerHandle | undefined;
  let flagd: FlagdListeners | undefined;
  let management: ManagementListener | undefined;
  // Opened first, so probes see a process that is starting (unready) rather than a refused connection.
  let started = false;
  platform.readiness.require('listeners', () => (started ? undefined : 'listeners and worker still starting'));
  try {
    management = await startManagementListener({ host: config.HOST, port: config.MANAGEMENT_PORT, registry: platform.metrics.registry, readiness: platform.readiness, logger });
    urls.management = management.url;
    for (const name of ['control', 'data', 'ingest'] as const) {
      if (!roles.includes(name)) continue;
      const app = createHttpApp({
        name,
        logger,
        trustProxy: config.TRUST_PROXY,
        rateLimiter: platform.rateLimiter,
        perIpLimit: config.RATE_LIMIT_PER_IP,
        perTokenLimit: config.RATE_LIMIT_PER_TOKEN,
        authenticator: platform.authenticator,
        access: platform.access,
        openapi: platform.openapi,
        routes: platform.routes[name],
        site: name === 'control' ? platform.consoleSite : undefined,
        metrics: platform.metrics.http,
        deadlineMs: config.REQUEST_DEADLINE_MS,
        reads: name === 'control' ? platform.reads : undefined,
      });
      const front = platform.front[name];
      const listener: http.RequestListener = front ? (req, res) => void (front(req, res) || app(req, res)) : app;
      const server = createListener(listener, config.HTTP_HEADERS_TIMEOUT_MS, config.HTTP_REQUEST_TIMEOUT_MS);
      // Each open stream holds a connection: bound them per listener (the stream caps are per caller).
      server.maxConnections = config.HTTP_MAX_CONNECTIONS;
      platform.tracing?.skipUntracedRequests(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(config[LISTENER_PORT[name]], config.HOST, () => resolve());
      });
      servers.push(server);
      const { port } = server.address() as AddressInfo;
      urls[name] = `http://${config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${port}`;
      logger.info({ listener: name, url: urls[name] }, 'listening');
    }
    if (platform.flagd && roles.includes('data')) {
      flagd = await platform.flagd.listen();
      urls.flagd = flagd.evaluationUrl;
      urls.flagdSync = flagd.syncUrl;
    }
    if (roles.includes('worker')) {
      // Loaded only here: the worker SDK and its native core cost a process that runs no worker
      // (a lone data plane) about 35 MB RSS (bench:memory).
      const { startWorker } = await import('../activities/worker.js');
      worker = await startWorker({
        address: platform.temporal.address,
        namespace: platform.temporal.namespace,
        taskQueue: platform.temporal.taskQueue,
        bundlePath: config.WORKFLOW_BUNDLE_PATH,
        deps: { sql: platform.db.sql, smtpUrl: config.SMTP_URL, from: config.MAIL_FROM, outbound: platform.outbound, guardrail: platform.guardrail, canary: platform.canary, bandit: platform.bandit, changeRequests: platform.changeRequests },
        tracing: platform.tracing,
        logger,
      });
      watchWorker(platform.metrics, worker, platform.temporal);
    }
    started = true;
  } catch (error) {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    await flagd?.close(0);
    await worker?.stop();
    await management?.close();
    throw error;
  }

  return {
    urls,
    worker,
    async stop() {
      platform.readiness.drain();
      await platform.beforeDrain();
      await Promise.all([...servers.map((s) => drain(s, config.SHUTDOWN_GRACE_MS)), flagd?.close(config.SHUTDOWN_GRACE_MS)]);
      await worker?.stop();
      await platform.close();
      await management?.close();
    },
  };
}

const KEEP_ALIVE_IDLE_MS = 5_000;

/** Node's HTTP server with bounded header and body timings, and parser errors in our envelope. */
function createListener(app: http.RequestListener, headersTimeout: number, requestTimeout: number): http.Server {
  const server = http.createServer(
    {
      maxHeaderSize: 16 * 1024,
      headersTimeout,
      requestTimeout: Math.max(requestTimeout, headersTimeout),
      // Node checks the timeouts on this interval; keep it well under the shortest one.
      connectionsCheckingInterval: Math.min(5_000, Math.ceil(headersTimeout / 4)),
    },
    app,
  );
  // Idle keep-alive connections close after 5-10 s, swept per listener rather than timed per request.
  server.keepAliveTimeout = 0;
  closeIdleKeepAlive(server, KEEP_ALIVE_IDLE_MS);
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    // Like Node's own handler: never write an error over a response already under way.
    const inFlight = (socket as { _httpMessage?: http.ServerResponse })._httpMessage;
    if (!socket.writable || error.code === 'ECONNRESET' || inFlight?.headersSent) return socket.destroy();
    const [status, text, message] =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'Request headers exceed 16 KB']
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout', 'Request not received in time']
          : [400, 'Bad Request', 'Malformed HTTP request'];
    const body = JSON.stringify({ error: text, message });
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  return server;
}

function drain(server: http.Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** The read replica's pool and routing (docs/operations.md#read-replica); watched while the process runs. */
async function openReadReplica(
  config: Config,
  deps: { primary: Sql; cache: Cache; logger: Logger; instanceId: string; onShutdown: (hook: ShutdownHook) => void },
): Promise<ReadRouting> {
  const replica = await openDatabase({
    url: config.DATABASE_READ_URL,
    poolSize: config.DATABASE_POOL_SIZE,
    replyTimeoutMs: config.DATABASE_REPLY_TIMEOUT_MS,
    connectTimeoutMs: config.BACKEND_TIMEOUT_MS,
    dataDir: config.dataDir,
    applicationName: `flags ${deps.instanceId} reads`,
    logger: deps.logger,
  });
  const reads = new ReadRouting({ primary: deps.primary, replica: replica.sql, cache: deps.cache, logger: deps.logger });
  reads.watch();
  deps.onShutdown(async () => {
    reads.stop();
    await replica.close();
  });
  return reads;
}
