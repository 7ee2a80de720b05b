import express, { type NextFunction, type Request, type Response } from 'express';
import { pinoHttp } from 'pino-http';
import type { ProjectAccess } from '../auth/access';
import type { Authenticator } from '../auth/authenticator';
import { currentDeadline, isBackendUnavailable, RequestDeadline, withDeadline } from '../infra/deadline';
import type { Logger } from '../infra/logger';
import { UNMATCHED_ROUTE, type HttpMetrics } from '../lib/metrics/metrics';
import { clientIp } from './client-ip';
import { HttpError, retryLater } from './errors';
import type { OpenApiCatalog } from './openapi';
import { PER_IP, PER_TOKEN, type RateLimiter } from './rate-limit';
import { requestIdOf } from './request-id';
import { mountRoutes, type AnyRoute, type RequestContext, type RouteDeps } from './route';

/** Paths whose segment is itself a credential (trigger URLs, invitation links): logged without it. */
const CAPABILITY_PATH = /^(\/api\/(?:triggers|invitations)\/)[^/]+/;

export interface HttpAppOptions {
  name: 'control' | 'data' | 'ingest';
  logger: Logger;
  trustProxy: number;
  rateLimiter: RateLimiter;
  perIpLimit: number;
  perTokenLimit: number;
  authenticator: Authenticator;
  /** Enforces the routes' declared access rules. */
  access: ProjectAccess;
  openapi: OpenApiCatalog;
  routes: AnyRoute[];
  /** Answers what no route took, before the 404 (the web console on the control plane). */
  site?: express.RequestHandler;
  /** Requests counted by route template (docs/operations.md#metrics). */
  metrics: HttpMetrics;
  /** A request still unanswered after this long is answered 503 (docs/operations.md#faults-and-recovery). */
  deadlineMs: number;
  /** Read replica routing (DATABASE_READ_URL, docs/operations.md#read-replica), for the control plane's routes. */
  reads?: RouteDeps['reads'];
}

/** How long the deadline's 503 waits for a COMMIT already sent (one round trip on a live server). */
const COMMIT_WAIT_MS = 1_000;

/** Seconds a client is told to wait after a backend outage 503. */
const OUTAGE_RETRY_AFTER_SECONDS = 5;

const backendUnavailable = () => retryLater(503, 'A backend this request needs is unavailable; retry shortly', OUTAGE_RETRY_AFTER_SECONDS);

/** One Express app per listener; all three share this middleware chain and error envelope. */
export function createHttpApp(opts: HttpAppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use(countRequests(opts.metrics));
  app.use((req, res, next) => {
    req.requestId = requestIdOf(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', req.requestId);
    req.clientIp = clientIp(req, opts.trustProxy);
    next();
  });
  app.use(deadlineBackstop(opts.deadlineMs));
  app.use(
    pinoHttp({
      logger: opts.logger.child({ listener: opts.name }),
      genReqId: (req) => (req as Request).requestId,
      customProps: (req) => ({ ip: (req as Request).clientIp }),
      serializers: {
        req: (req) => ({ id: req.id, method: req.method, url: String(req.url).split('?')[0].replace(CAPABILITY_PATH, '$1[redacted]') }),
        res: (res) => ({ statusCode: res.statusCode }),
      },
      autoLogging: { ignore: (req) => req.url === '/api/health' },
    }),
  );
  app.use(async (req, res, next) => {
    try {
      await opts.rateLimiter.enforce(res, PER_IP.bucket(req.clientIp), opts.perIpLimit, PER_IP.what);
      req.principal = await opts.authenticator.authenticate(req);
      next();
    } catch (error) {
      next(error);
    }
  });

  const router = express.Router();
  mountRoutes(router, opts.routes, {
    logger: opts.logger,
    openapi: opts.openapi,
    access: opts.access,
    reads: opts.reads,
    afterAuth: async (ctx: RequestContext<unknown, unknown, unknown>) => {
      const bucket = PER_TOKEN.bucket(ctx.principal);
      if (bucket !== undefined) await opts.rateLimiter.enforce(ctx.res, bucket, opts.perTokenLimit, PER_TOKEN.what);
    },
  });
  app.use(router);
  if (opts.site) app.use(opts.site);

  app.use((req, _res, next) => next(new HttpError(404, `No route for ${req.method} ${req.path}`)));
  app.use(errorHandler());
  return app;
}

/** Counts each answered request under its route's template (Express's matched path), or `unmatched`. */
function countRequests(metrics: HttpMetrics): express.RequestHandler {
  return (req, res, next) => {
    const startedAt = performance.now();
    res.once('finish', () => {
      const route = req.route === undefined ? UNMATCHED_ROUTE : String((req.route as { path: unknown }).path);
      metrics.route(req.method, route).observe(res.statusCode, (performance.now() - startedAt) / 1000);
    });
    next();
  };
}

/**
 * Every request runs under a deadline (api/infra/deadline.ts). When it passes unanswered, the
 * request is answered 503 with Retry-After, once any COMMIT it already sent has settled; from
 * then on nothing it does commits. Streams have answered their headers by then and are left alone.
 */
function deadlineBackstop(deadlineMs: number): express.RequestHandler {
  return (req, res, next) => {
    const deadline = new RequestDeadline(Date.now() + deadlineMs);
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      timer = setTimeout(() => void fire(), Math.max(0, deadline.at - Date.now()));
    };
    const fire = async () => {
      if (res.headersSent) return;
      // The deadline moved (a route that waits on purpose).
      if (!deadline.passed) return arm();
      deadline.expire();
      await deadline.commitsSettled(COMMIT_WAIT_MS);
      if (res.headersSent) return;
      req.log?.warn({ deadlineMs }, 'request deadline passed; answered 503');
      const refusal = backendUnavailable();
      res.setHeader('Retry-After', String(refusal.extra.retryAfter));
      res.status(503).json(refusal.toBody());
    };
    arm();
    const settled = () => {
      clearTimeout(timer);
      deadline.release();
    };
    res.once('close', settled);
    res.once('finish', settled);
    withDeadline(deadline, next);
  };
}

/** Never sends a stack trace: unexpected errors are logged and answered with a bare 500. */
export function errorHandler() {
  return (error: unknown, req: Request, res: Response, _next: NextFunction) => {
    const http = toHttpError(error);
    // After the deadline's 503 the handler's own late outcome has nowhere to go.
    if (http.status >= 500 && !(res.headersSent && currentDeadline()?.passed)) req.log?.error({ err: error }, 'request failed');
    if (res.headersSent) {
      res.end();
      return;
    }
    if (typeof http.extra.retryAfter === 'number') res.setHeader('Retry-After', String(http.extra.retryAfter));
    res.status(http.status).json(http.toBody());
  };
}

function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (isBackendUnavailable(error)) return backendUnavailable();
  const e = error as { status?: number; statusCode?: number; type?: string; expose?: boolean; message?: string };
  const status = e?.status ?? e?.statusCode;
  // body-parser and friends mark client errors with a status and `expose`.
  if (status && status >= 400 && status < 500) return new HttpError(status, e.expose && e.message ? e.message : 'Bad request');
  return new HttpError(500, 'Internal server error');
}
