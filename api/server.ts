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
import { SessionManager } from './auth/sessions';
import type { Config, Role } from './config';
import { accountRoutes } from './features/accounts/routes';
import { AccountService } from './features/accounts/service';
import { AccountStore } from './features/accounts/store';
import { PasswordHasher } from './features/accounts/passwords';
import { AuthThrottle, SendThrottle } from './features/accounts/throttle';
import { AuditWriter } from './features/audit/writer';
import { cliLoginRoutes } from './features/cli-login/routes';
import { cohortFeatureRoutes } from './features/cohorts/wiring';
import { consoleSite } from './lib/console/site';
import { healthRoutes } from './lib/health/routes';
import { createOAuthFeature } from './features/oauth/wiring';
import { mcpRoutes } from './features/mcp/routes';
import { MailQueue } from './lib/mail/mail-queue';
import { createEvaluationFeature, type EvaluationFeature, type FrontHandler } from './features/evaluation/wiring';
import { explainFeatureRoutes } from './features/explain/wiring';
import { createSimulateFeature } from './features/simulate/wiring';
import { createDemoFeature } from './features/demo/wiring';
import type { DemoServiceRegistry } from './features/demo/registry';
import { flagBatchRoutes } from './features/flags/batch-wiring';
import { flagRoutes } from './features/flags/routes';
import { FlagService } from './features/flags/service';
import { FlagStore } from './features/flags/store';
import { orgRoutes } from './features/orgs/routes';
import { createGuardrailFeature } from './features/guardrails/wiring';
import type { GuardrailChecker } from './features/guardrails/checker';
import { createCanaryFeature } from './features/canary/wiring';
import type { CanaryActivityDeps } from '../activities/canary';
import type { BanditActivityDeps } from '../activities/bandit';
import { createExperimentFeature } from './features/experiments/wiring';
import { OutboxRelay } from './lib/outbox/relay';
import { OutboxWriter } from './lib/outbox/store';
import { createCredentialFeatures } from './features/tokens/wiring';
import { createEventDeliveryFeatures } from './features/webhooks/wiring';
import { triggerFeatureRoutes } from './features/triggers/wiring';
import { projectFeatureRoutes } from './features/projects/wiring';
import { openApiRoutes } from './http/openapi-route';
import { createHttpApp } from './http/app';
import { OpenApiCatalog } from './http/openapi';
import { OutboundClient } from './http/outbound';
import { createAnalyticsFeature, createAnalyticsWriter } from './features/analytics/wiring';
import type { AnalyticsWriter } from '../analytics/writer';
import { RateLimiter } from './http/rate-limit';
import type { AnyRoute } from './http/route';
import { createCache, type Cache } from './infra/cache';
import { createLogger, type Logger } from './infra/logger';
import { migrate } from './infra/migrate';
import { projectPath } from './infra/paths';
import { openDatabase, type Database } from './infra/postgres';
import { detachedTemporal, openTemporal, type Temporal } from './infra/temporal';

const APP_VERSION: string = JSON.parse(fs.readFileSync(projectPath('package.json'), 'utf8')).version;

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
  /** Which services are public demo services (spec 4.2): isDemoService / demoServiceIds (also isDemo / list). */
  demo: DemoServiceRegistry;
  /** The SSRF-guarded HTTP client for every user-supplied URL (webhooks, alert channels, export). */
  outbound: OutboundClient;
  /** Every analytics table's batched writer (its `flush` writes what producers recorded, e.g. before a test reads). */
  analyticsWriter: AnalyticsWriter;
  /** Evaluation data plane (snapshots, streams, evaluation events); absent on worker/ingest-only processes. */
  evaluation?: EvaluationFeature;
  /** Handlers that see a listener's requests before Express (the evaluation lean path); false = not mine. */
  front: Partial<Record<'control' | 'data' | 'ingest', FrontHandler>>;
  /** The web console (dist/web) on the control plane; absent when it is not built or not a control process. */
  consoleSite?: RequestHandler;
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
export async function createPlatform(config: Config, logger = createLogger(config.LOG_LEVEL)): Promise<Platform> {
  const hooks: ShutdownHook[] = [];
  const onShutdown = (hook: ShutdownHook) => hooks.push(hook);
  const drainHooks: ShutdownHook[] = [];
  try {
    const db = await openDatabase({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, dataDir: config.dataDir, logger });
    onShutdown(() => db.close());
    const applied = await migrate(db.sql);
    if (applied.length) logger.info({ applied }, 'database migrations applied');

    const cache = createCache(config.REDIS_URL, config.REDIS_KEY_PREFIX);
    onShutdown(() => cache.close());

    // Only the schema's owners run analytics DDL; data-plane and ingest processes only write.
    const ownsSchema = ownsAnalyticsSchema(config.ROLES, config.CLICKHOUSE_URL);
    const analytics = await openAnalytics({ url: config.CLICKHOUSE_URL, database: config.CLICKHOUSE_DATABASE, chdbPath: config.CHDB_PATH ?? path.join(config.dataDir, 'chdb'), ownsSchema });
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
      ? await openTemporal({ ...temporalOptions, address: config.TEMPORAL_ADDRESS, cliPath: config.TEMPORAL_CLI_PATH, dataDir: config.dataDir, logger })
      : detachedTemporal(temporalOptions);
    onShutdown(() => temporal.close());

    const instanceId = randomUUID();
    const publicBaseUrl = config.PUBLIC_BASE_URL ?? `http://${config.HOST}:${config.PORT}`;
    const rateLimiter = new RateLimiter(cache, config.RATE_LIMIT_WINDOW_SECONDS);
    const accountStore = new AccountStore(db.sql);
    const sessions = new SessionManager(accountStore, config.SESSION_TTL_HOURS);
    const authenticator = new Authenticator(sessions);
    const mail = new MailQueue(temporal, db.sql);
    const purge = setInterval(() => {
      accountStore.purgeExpired().catch((error) => logger.warn({ err: error }, 'purging expired sessions failed'));
    }, 3600_000);
    purge.unref();
    onShutdown(async () => clearInterval(purge));
    const passwords = new PasswordHasher({ costLog2: config.SCRYPT_COST_LOG2, concurrency: config.SCRYPT_CONCURRENCY, maxQueue: config.SCRYPT_MAX_QUEUE });
    const authThrottle = new AuthThrottle(cache, {
      perIp: config.AUTH_RATE_LIMIT_PER_IP,
      ipWindowSeconds: config.AUTH_RATE_LIMIT_WINDOW_SECONDS,
      threshold: config.AUTH_LOCKOUT_THRESHOLD,
      baseSeconds: config.AUTH_LOCKOUT_BASE_SECONDS,
      maxSeconds: config.AUTH_LOCKOUT_MAX_SECONDS,
    });
    // Mail and test alerts users can aim at any address: verification resends, alert channels.
    const sends = new SendThrottle(cache, { perUser: config.SEND_LIMIT_PER_USER, perRecipient: config.SEND_LIMIT_PER_RECIPIENT, windowSeconds: config.SEND_LIMIT_WINDOW_SECONDS });
    const accounts = new AccountService({ store: accountStore, sessions, mail, passwords, throttle: authThrottle, sends, publicBaseUrl });
    const openapi = new OpenApiCatalog({ title: 'Feature Flag Service', version: APP_VERSION });
    // Project API tokens (opaque, JWT) and personal access tokens: resolvers and routes.
    const credentials = await createCredentialFeatures({ config, sql: db.sql, cache, logger, authenticator });
    onShutdown(() => credentials.stop());
    // The one project gate every feature shares (spec 5.3 through api/auth/permissions.ts).
    const projectAccess = new ProjectAccess(db.sql, config.ADMIN_EMAILS);
    // OAuth 2.1 for MCP clients: consent, connections and `mcp_` connector tokens (docs/mcp.md).
    const oauth = createOAuthFeature({ sql: db.sql, logger, rateLimiter, authenticator, publicBaseUrl: config.PUBLIC_BASE_URL });
    // Flags: every change commits with its outbox event; the relay publishes it (nudged at once in-process).
    // Each registered consumer has its own position and retries: a slow one never holds back the bus.
    const outbox = new OutboxRelay({ sql: db.sql, cache, logger });
    const flagService = new FlagService({
      sql: db.sql,
      store: new FlagStore(db.sql),
      audit: new AuditWriter(),
      outbox: new OutboxWriter(),
      afterCommit: () => outbox.nudge(),
    });
    const outbound = new OutboundClient({ allowPrivateTargets: config.allowPrivateTargets });
    onShutdown(() => outbound.close());
    // Webhooks and org alert channels, delivered by Temporal workflows through the SSRF guard.
    const eventDelivery = createEventDeliveryFeatures({ sql: db.sql, temporal, mail, outbound, sends, publicBaseUrl, logger });
    outbox.register(eventDelivery.webhookConsumer);
    // Production guardrail: a watch per toggle or serving change, judged by the worker (docs/guardrails.md).
    const guardrails = createGuardrailFeature({ sql: db.sql, analytics, temporal, flags: flagService, notifyOrgAlertChannels: eventDelivery.notifyOrgAlertChannels, logger });
    outbox.register(guardrails.consumer);
    // Canary pipelines (CONTRACT 9): routes here, the pipeline a workflow per flag (docs/canary.md).
    const canary = createCanaryFeature({ sql: db.sql, analytics, temporal, flags: flagService, notifyOrgAlertChannels: eventDelivery.notifyOrgAlertChannels, logger });
    // Bandit experiments (CONTRACT 10): routes here, reallocation a workflow per experiment (docs/experiments.md).
    const experiments = createExperimentFeature({ sql: db.sql, analytics, temporal, flags: flagService, logger });
    // Public demo service: seeded on the embedded profile (DEMO_SEED), registry, demo list cache.
    const demo = await createDemoFeature({ config, sql: db.sql, cache, logger, flags: flagService });
    onShutdown(() => demo.stop());

    // The one batched analytics writer (evaluation events and every other table); the analytics
    // feature's stop() flushes and closes it.
    const { writer: analyticsWriter, evaluations: recorder } = createAnalyticsWriter({ config, analytics, logger, instanceId });
    // Simulate (docs/simulate.md): the contexts the ring takes also go to the recent-contexts warehouse.
    const simulate = createSimulateFeature({ config, analytics, sink: analyticsWriter });
    // Evaluation data plane: snapshots from Postgres kept current by the flag-change bus, the lean
    // hot path in front of Express, streams; its events go to the analytics writer.
    const evaluation =
      config.ROLES.includes('control') || config.ROLES.includes('data')
        ? await createEvaluationFeature({ config, sql: db.sql, cache, analytics, logger, authenticator, jwt: credentials.jwt, projectAccess, openapi, recorder, demo: demo.registry, recordContext: simulate.recordContext })
        : undefined;
    if (evaluation) {
      onShutdown(() => evaluation.stop());
      drainHooks.push(() => evaluation.drain());
    }

    // Analytics warehouse: the batched writer every producer shares, ingestion and queries.
    const analyticsFeature = createAnalyticsFeature({ config, sql: db.sql, cache, analytics, writer: analyticsWriter, access: projectAccess, authenticator, flags: flagService, notifyOrgAlertChannels: eventDelivery.notifyOrgAlertChannels, outbound, deliveries: eventDelivery.deliveries, logger });
    onShutdown(() => analyticsFeature.stop());

    const health = healthRoutes({
      evaluationChecks: evaluation ? () => evaluation.checks() : undefined,
      analyticsWriterStats: () => analyticsWriter.stats(),
      cache,
      db,
      analytics,
      temporal,
      instanceId,
      version: { app: APP_VERSION, commit: config.APP_COMMIT, environment: config.NODE_ENV },
    });
    const control: AnyRoute[] = [
      ...health,
      ...openApiRoutes(openapi),
      ...accountRoutes({ accounts, sessions, throttle: authThrottle, sql: db.sql, secureCookies: config.secureCookies, devMailbox: config.devMailbox }),
      ...orgRoutes({ sql: db.sql }),
      ...credentials.routes,
      ...oauth.routes,
      ...cliLoginRoutes({ tokens: credentials.personalTokens, rateLimiter }),
      // Before the flag routes: GET /api/flags/stream must not be taken for GET /api/flags/:key.
      ...(evaluation?.routes.control ?? []),
      ...demo.routes,
      ...(evaluation ? explainFeatureRoutes({ snapshots: evaluation.snapshots }) : []),
      ...(evaluation ? simulate.routes(evaluation) : []),
      // Before the flag routes: /api/flags/bulk, /export and /import must not be taken for /api/flags/:key.
      ...flagBatchRoutes({ sql: db.sql, flags: flagService, access: projectAccess, logger, demo }),
      ...flagRoutes({ flags: flagService, access: projectAccess, demoList: demo.list.handle }),
      ...projectFeatureRoutes({ sql: db.sql, access: projectAccess, temporal, mail, publicBaseUrl, logger }),
      ...eventDelivery.routes,
      ...triggerFeatureRoutes({ sql: db.sql, cache, flags: flagService, publicBaseUrl }),
      ...analyticsFeature.routes.control,
      ...canary.routes,
      ...experiments.routes,
      ...cohortFeatureRoutes({ sql: db.sql, afterCommit: () => outbox.nudge() }),
    ];
    // Hosted MCP server (docs/mcp.md): its tools run the control routes above in-process, for the connector token.
    control.push(
      ...mcpRoutes({ routes: [...control], access: projectAccess, authenticator, rateLimiter, perTokenLimit: config.RATE_LIMIT_PER_TOKEN, publicBaseUrl: config.PUBLIC_BASE_URL, version: APP_VERSION }),
    );
    const data: AnyRoute[] = [...health, ...(evaluation?.routes.data ?? []), ...analyticsFeature.routes.data];
    const ingest: AnyRoute[] = [...health, ...analyticsFeature.routes.ingest];

    // Keep last: outbox consumers (outbox.register) must all be registered before the relay starts.
    // Every control replica runs a relay; they share the work safely (SKIP LOCKED leases).
    if (config.ROLES.includes('control')) {
      outbox.start();
      onShutdown(() => outbox.stop());
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
      flagService,
      outbox,
      guardrail: guardrails.checker,
      canary: canary.activityDeps,
      bandit: experiments.activityDeps,
      demo: demo.registry,
      outbound,
      routes: { control, data, ingest },
      evaluation,
      front: evaluation ? { control: evaluation.front, data: evaluation.front } : {},
      // The web console (api/lib/console, web/README.md): its CSP lets it reach the public data plane.
      consoleSite: config.ROLES.includes('control')
        ? consoleSite({ dir: projectPath('dist', 'web'), connectSrc: [...(config.PUBLIC_DATA_URL ? [new URL(config.PUBLIC_DATA_URL).origin] : []), ...config.CONSOLE_CONNECT_SRC], logger })
        : undefined,
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
  urls: Partial<Record<'control' | 'data' | 'ingest', string>>;
  worker?: WorkerHandle;
  /** Stop accepting, let in-flight requests finish (bounded), then close the platform. */
  stop(): Promise<void>;
}

const LISTENER_PORT = { control: 'PORT', data: 'DATA_PORT', ingest: 'INGEST_PORT' } as const;

export async function startRoles(platform: Platform, roles: readonly Role[]): Promise<RunningListeners> {
  const { config, logger } = platform;
  const servers: http.Server[] = [];
  const urls: RunningListeners['urls'] = {};
  let worker: WorkerHandle | undefined;
  try {
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
      });
      const front = platform.front[name];
      const listener: http.RequestListener = front ? (req, res) => void (front(req, res) || app(req, res)) : app;
      const server = createListener(listener, config.HTTP_HEADERS_TIMEOUT_MS, config.HTTP_REQUEST_TIMEOUT_MS);
      // Each open stream holds a connection: bound them per listener (the stream caps are per caller).
      server.maxConnections = config.HTTP_MAX_CONNECTIONS;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(config[LISTENER_PORT[name]], config.HOST, () => resolve());
      });
      servers.push(server);
      const { port } = server.address() as AddressInfo;
      urls[name] = `http://${config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${port}`;
      logger.info({ listener: name, url: urls[name] }, 'listening');
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
        deps: { sql: platform.db.sql, smtpUrl: config.SMTP_URL, from: config.MAIL_FROM, outbound: platform.outbound, guardrail: platform.guardrail, canary: platform.canary, bandit: platform.bandit },
        logger,
      });
    }
  } catch (error) {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    await worker?.stop();
    throw error;
  }

  return {
    urls,
    worker,
    async stop() {
      await platform.beforeDrain();
      await Promise.all(servers.map((s) => drain(s, config.SHUTDOWN_GRACE_MS)));
      await worker?.stop();
      await platform.close();
    },
  };
}

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
  server.keepAliveTimeout = 5_000;
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
