import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { ZodTypeAny } from 'zod';
import { bearerToken, type Authenticator } from '../../auth/authenticator';
import { ANONYMOUS, type Principal } from '../../auth/principal';
import { checkBodyHeaders } from '../../http/body';
import { clientIp } from '../../http/client-ip';
import { HttpError, malformedJson, payloadTooLarge, requestAborted, tooManyRequests } from '../../http/errors';
import { PER_IP, PER_TOKEN, rateHeaders, rateLimitMessage, tighter, type RateDecision } from '../../http/rate-limit';
import { requestIdOf } from '../../http/request-id';
import { admit, bodyLimitOf, type AnyDeclaration, type RouteDeclaration } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { HttpMetrics, RouteMetrics } from '../../lib/metrics/metrics';
import type { LocalRateLimiter } from './local-rate-limiter';

/**
 * The lean edge: the hottest data-plane routes served straight from node:http, in front of
 * Express (docs/data-plane.md, "The lean path"). The routes are the adapters' (wiring.ts passes
 * them in), each one declaration that the OpenAPI catalog registers and this edge executes:
 *   POST /api/flags/evaluate                    REST single evaluation   rest.ts
 *   POST /api/flags/evaluate/batch              REST batch               rest.ts
 *   POST /api/ofrep/v1/evaluate/flags/{key}     OFREP single             ofrep.ts
 *   POST /api/ofrep/v1/evaluate/flags           OFREP bulk               ofrep.ts
 *   GET  /api/flags/stream, /api/connect/stream  SSE                      sse.ts
 *   GET  /api/ofrep/v1/event-stream             OFREP event stream       ofrep-events.ts
 * Every other request goes to Express untouched (CORS preflights of SDK routes are answered
 * here, and their answers get CORS headers on the way).
 *
 * The edge runs the steps of the Express chain, in its order and with the same functions:
 * request id, per-IP limit, authentication (401 for a bad bearer), the route's declared policy
 * (`admit`: credential policy, CSRF), per-token limit, then a JSON body within the route's
 * declared limit (`bodyLimitOf`, checkBodyHeaders: 413/415/400). So a declaration cannot say one
 * thing and the edge do another. Then the route's adapter answers (validation, access,
 * per-service limit, evaluation) and the edge sends it, with RateLimit-* headers on every answer
 * and Retry-After on a refusal. What it skips is Express's router, middleware stack and
 * per-request access log line (errors are still logged). Rate limits are local counters synced
 * to the shared cache (local-rate-limiter.ts), so no request waits on Redis.
 */
export interface LeanDeps {
  authenticator: Pick<Authenticator, 'resolveBearer' | 'authenticate'>;
  limiter: LocalRateLimiter;
  perIpLimit: number;
  perTokenLimit: number;
  trustProxy: number;
  logger: Logger;
  /** Answers counted by route template, like the Express chain's (streams count as streams). */
  metrics: HttpMetrics;
}

/** One request on the lean path, as its adapter sees it. */
export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** performance.now() when the request arrived. */
  readonly startedAt: number;
  /** The query string, without `?` ('' when none). */
  readonly query: string;
  readonly principal: Principal;
  /** Time spent on the per-IP and per-token limits and authentication (REST `_debug`). */
  readonly rateLimitMs: number;
  readonly bodyBytes: number;
  /** The path's last segment when the route's path ends in a parameter (percent-encoded until its adapter decodes it). */
  param: string | undefined;
  /** Spends a budget: its headers when it is the tightest so far, 429 when it refused. */
  limit(decision: RateDecision | undefined, what: string): void;
  /** X-Request-Id and the rate headers, for an answer the adapter writes itself (SSE). */
  headers(): Record<string, string | number>;
  /** Sends a JSON body (or a bare 304), with the common headers and `extra`. */
  send(status: number, body: string | Buffer, extra?: Record<string, string>): void;
}

/** How a lean route answers once the edge has admitted the request and read its body. */
interface LeanAnswer {
  method: 'get' | 'post';
  /**
   * Answers from the parsed JSON body (undefined when there is none; routes that declare no
   * body read none). Throws, or returns a promise that rejects, to answer an error; returns a
   * promise only when it waited (a service loaded on first use, a session's membership).
   */
  respond(ex: Exchange, body: unknown): Promise<void> | undefined;
  /** The error body of its protocol; the REST envelope when absent. */
  errorBody?(ex: Exchange, error: HttpError): Record<string, unknown>;
}

/**
 * A route served by the edge: its declaration (path, schemas, credential policy, CSRF, body
 * limit; documented in the OpenAPI catalog) and its adapter. The path may end in one parameter
 * (`/:key`), which the edge hands over as `Exchange.param`.
 */
export type LeanRoute = AnyDeclaration & LeanAnswer;

/**
 * Who may call the evaluation POSTs (REST single and batch, OFREP single and bulk): anyone, since
 * public flags need no credential; not personal tokens (`sdk`); each flag decided by its
 * visibility to the caller (`per: 'flag'`). They only read, so a dashboard session needs no
 * X-CSRF-Token.
 */
export const EVALUATION_POLICY = {
  auth: 'public',
  sdk: true,
  access: { capability: 'flags:read', per: 'flag' },
  csrfExempt: true,
} as const;

export function defineLeanRoute<P extends ZodTypeAny = ZodTypeAny, Q extends ZodTypeAny = ZodTypeAny, B extends ZodTypeAny = ZodTypeAny>(
  route: RouteDeclaration<P, Q, B> & LeanAnswer,
): LeanRoute {
  return route as unknown as LeanRoute;
}

/**
 * CORS for the evaluation and SDK routes: any origin, without credentials (a browser never sends
 * the dashboard cookie cross-origin to them; SDKs use bearer tokens or public flags). Set here,
 * before Express, so error answers from the Express chain (401, 429 ...) carry them too.
 */
const SDK_PATH = /^\/api\/(?:flags\/evaluate(?:\/batch)?|flags\/stream|ofrep\/|connect\/|grpc-web\/|sdk-config$)/;
const isSdkPath = (path: string) => SDK_PATH.test(path);
const CORS_HEADERS: Record<string, string> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers':
    'ETag, Last-Modified, X-Request-Id, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After, Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin',
};
const CORS_PREFLIGHT_HEADERS: Record<string, string> = {
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers':
    'Authorization, Content-Type, X-Service-Id, X-Environment, X-Request-Id, If-None-Match, Last-Event-ID, Connect-Protocol-Version, Connect-Timeout-Ms, X-Grpc-Web, X-User-Agent, Grpc-Timeout',
  'Access-Control-Max-Age': '600',
};

/** What the edge needs of a route per request, worked out once at startup. */
class ServedRoute {
  readonly method: 'GET' | 'POST';
  /** The path up to its trailing parameter, for a route whose path ends in one. */
  readonly prefix: string | undefined;
  readonly readsBody: boolean;
  readonly bodyLimit: number;
  readonly anonymousBodyLimit: number;
  readonly bodyOptions: { textPlainJson?: boolean };
  readonly metrics: RouteMetrics;

  constructor(readonly route: LeanRoute, metrics: HttpMetrics) {
    this.method = route.method === 'get' ? 'GET' : 'POST';
    const param = route.path.indexOf('/:');
    if (param !== -1 && route.path.indexOf('/', param + 1) !== -1) throw new Error(`${route.path}: the lean edge takes a parameter only as the last segment`);
    this.prefix = param === -1 ? undefined : route.path.slice(0, param + 1);
    // The edge has no access gate (ProjectAccess): its adapters decide each flag (`per: 'flag'`).
    if (route.access !== undefined && !('per' in route.access)) throw new Error(`${route.path}: the lean edge serves only access rules decided per flag`);
    this.readsBody = route.body !== undefined;
    this.bodyLimit = bodyLimitOf(route, false);
    this.anonymousBodyLimit = bodyLimitOf(route, true);
    this.bodyOptions = { textPlainJson: route.textPlainJson };
    this.metrics = metrics.route(this.method, route.path);
  }
}

/**
 * Per-request state threaded through the steps. The steps are plain functions and the body
 * listeners are module-level functions that find their exchange on the request, so a request
 * allocates this object and no closures: every promise and closure costs on this path (the
 * process runs with promise hooks on, through the Temporal client's AsyncLocalStorage).
 */
class LeanExchange implements Exchange {
  principal: Principal = ANONYMOUS;
  rate: RateDecision | undefined = undefined;
  rateLimitMs = 0;
  bodyBytes = 0;
  bodyLimit = 0;
  first: Buffer | undefined = undefined;
  chunks: Buffer[] | undefined = undefined;
  bodyDone = false;
  readonly startedAt = performance.now();

  constructor(
    readonly deps: LeanDeps,
    readonly served: ServedRoute,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly requestId: string,
    readonly query: string,
    public param: string | undefined,
  ) {}

  limit(decision: RateDecision | undefined, what: string): void {
    if (decision === undefined) return;
    this.rate = tighter(this.rate, decision);
    if (!decision.allowed) throw tooManyRequests(rateLimitMessage(decision.limit, this.deps.limiter.windowSeconds, what));
  }

  headers(): Record<string, string | number> {
    const headers = this.rate === undefined ? {} : rateHeaders(this.rate);
    headers['X-Request-Id'] = this.requestId;
    return headers;
  }

  send(status: number, body: string | Buffer, extra?: Record<string, string>): void {
    const { res } = this;
    if (res.headersSent || res.destroyed) return;
    this.served.metrics.observe(status, (performance.now() - this.startedAt) / 1000);
    const headers = this.headers();
    if (extra !== undefined) Object.assign(headers, extra);
    if (status === 304) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    headers['Content-Type'] = 'application/json; charset=utf-8';
    headers['Content-Length'] = Buffer.byteLength(body);
    res.writeHead(status, headers);
    res.end(body);
  }
}

const EXCHANGE = Symbol('lean exchange');
type WithExchange = IncomingMessage & { [EXCHANGE]?: LeanExchange };

export function createLeanHandler(deps: LeanDeps, routes: readonly LeanRoute[]): (req: IncomingMessage, res: ServerResponse) => boolean {
  const exact = { GET: new Map<string, ServedRoute>(), POST: new Map<string, ServedRoute>() };
  const prefixed: ServedRoute[] = [];
  for (const route of routes) {
    const served = new ServedRoute(route, deps.metrics);
    if (served.prefix === undefined) exact[served.method].set(route.path, served);
    else prefixed.push(served);
  }
  return (req, res) => {
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (req.headers.origin !== undefined && isSdkPath(path)) {
      // Browsers on other origins (a page on {base_url} calling {data_url}) may call SDK routes.
      if (req.method === 'OPTIONS') {
        res.writeHead(204, { ...CORS_HEADERS, ...CORS_PREFLIGHT_HEADERS });
        res.end();
        return true;
      }
      for (const name in CORS_HEADERS) res.setHeader(name, CORS_HEADERS[name]);
    }
    const method = req.method;
    if (method !== 'GET' && method !== 'POST') return false;
    let served = exact[method].get(path);
    let param: string | undefined;
    if (served === undefined) {
      for (const r of prefixed) {
        const prefix = r.prefix!;
        if (r.method === method && path.length > prefix.length && path.startsWith(prefix) && path.indexOf('/', prefix.length) === -1) {
          served = r;
          param = path.slice(prefix.length);
          break;
        }
      }
      if (served === undefined) return false;
    }
    begin(new LeanExchange(deps, served, req, res, requestIdOf(req.headers['x-request-id']), q === -1 ? '' : url.slice(q + 1), param));
    return true;
  };
}

function begin(ex: LeanExchange): void {
  const { deps } = ex;
  try {
    ex.limit(deps.limiter.consume(PER_IP.bucket(clientIp(ex.req, deps.trustProxy)), deps.perIpLimit), PER_IP.what);
    const principal = authenticate(deps, ex.req);
    if (principal instanceof Promise) principal.then((p) => afterAuth(ex, p), (error) => fail(ex, error));
    else afterAuth(ex, principal);
  } catch (error) {
    fail(ex, error);
  }
}

/** The caller, without a promise when there is no credential at all. */
function authenticate(deps: LeanDeps, req: IncomingMessage): Principal | Promise<Principal> {
  const header = req.headers.authorization;
  if (header !== undefined) {
    const token = bearerToken(header);
    if (token !== undefined) return deps.authenticator.resolveBearer(token);
  }
  if (req.headers.cookie !== undefined) return deps.authenticator.authenticate(req as never);
  return ANONYMOUS;
}

function afterAuth(ex: LeanExchange, principal: Principal): void {
  const { deps, served } = ex;
  try {
    const csrf = ex.req.headers['x-csrf-token'];
    admit(served.route, principal, served.method, typeof csrf === 'string' ? csrf : undefined);
    const tokenBucket = PER_TOKEN.bucket(principal);
    if (tokenBucket !== undefined) ex.limit(deps.limiter.consume(tokenBucket, deps.perTokenLimit), PER_TOKEN.what);
    ex.principal = principal;
    ex.rateLimitMs = performance.now() - ex.startedAt;
    if (!served.readsBody) return respond(ex, undefined);
    ex.bodyLimit = principal.type === 'anonymous' ? served.anonymousBodyLimit : served.bodyLimit;
    const problem = checkBodyHeaders(ex.req.headers, ex.bodyLimit, served.bodyOptions);
    if (problem === null) return respond(ex, undefined);
    if (problem !== undefined) throw problem;
    (ex.req as WithExchange)[EXCHANGE] = ex;
    ex.req.on('data', onBodyData);
    ex.req.once('end', onBodyEnd);
    ex.req.once('error', onBodyError);
  } catch (error) {
    fail(ex, error);
  }
}

/** Hands the request to its adapter; a step that went asynchronous reports its failure too. */
function respond(ex: LeanExchange, body: unknown): void {
  try {
    const done = ex.served.route.respond(ex, body);
    if (done !== undefined) done.catch((error) => fail(ex, error));
  } catch (error) {
    fail(ex, error);
  }
}

function onBodyData(this: WithExchange, chunk: Buffer): void {
  const ex = this[EXCHANGE]!;
  if (ex.bodyDone) return;
  ex.bodyBytes += chunk.length;
  if (ex.bodyBytes > ex.bodyLimit) {
    ex.bodyDone = true;
    fail(ex, payloadTooLarge(ex.bodyLimit));
    return;
  }
  if (ex.first === undefined) ex.first = chunk;
  else (ex.chunks ??= [ex.first]).push(chunk);
}

function onBodyEnd(this: WithExchange): void {
  const ex = this[EXCHANGE]!;
  if (ex.bodyDone) return;
  ex.bodyDone = true;
  const buffer = ex.chunks !== undefined ? Buffer.concat(ex.chunks) : ex.first;
  ex.first = undefined;
  ex.chunks = undefined;
  let body: unknown;
  try {
    body = buffer === undefined ? undefined : JSON.parse(buffer.toString('utf8'));
  } catch {
    fail(ex, malformedJson());
    return;
  }
  respond(ex, body);
}

function onBodyError(this: WithExchange): void {
  const ex = this[EXCHANGE]!;
  if (ex.bodyDone) return;
  ex.bodyDone = true;
  fail(ex, requestAborted());
}

/** Answers an error in the route's protocol; anything but an HttpError is logged and answered 500. */
function fail(ex: LeanExchange, error: unknown) {
  let http: HttpError;
  if (error instanceof HttpError) http = error;
  else {
    ex.deps.logger.error({ err: error, requestId: ex.requestId, path: ex.req.url?.split('?')[0] }, 'request failed');
    http = new HttpError(500, 'Internal server error');
  }
  const { route } = ex.served;
  const body = route.errorBody === undefined ? http.toBody() : route.errorBody(ex, http);
  ex.send(http.status, JSON.stringify(body), http.status === 413 ? { Connection: 'close' } : undefined);
}
