import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { bearerToken, type Authenticator } from '../../auth/authenticator';
import { ANONYMOUS, type Principal } from '../../auth/principal';
import { checkBodyHeaders } from '../../http/body';
import { clientIp, ipBucket } from '../../http/client-ip';
import { HttpError, malformedJson, payloadTooLarge, personalTokenRefused, requestAborted, tooManyRequests } from '../../http/errors';
import { rateHeaders, rateLimitMessage, tighter, type RateDecision } from '../../http/rate-limit';
import { requestIdOf } from '../../http/request-id';
import { BODY_LIMITS } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { LocalRateLimiter } from './local-rate-limiter';

/**
 * The lean edge: the hottest data-plane routes served straight from node:http, in front of
 * Express (docs/quality-bars.md). The routes are the adapters' (wiring.ts passes them in):
 *   POST /api/flags/evaluate                    REST single evaluation   rest.ts
 *   POST /api/flags/evaluate/batch              REST batch               rest.ts
 *   POST /api/ofrep/v1/evaluate/flags/{key}     OFREP single             ofrep.ts
 *   POST /api/ofrep/v1/evaluate/flags           OFREP bulk               ofrep.ts
 *   GET  /api/flags/stream, /api/connect/stream  SSE                      sse.ts
 *   GET  /api/ofrep/v1/event-stream             OFREP event stream       ofrep-events.ts
 * Every other request goes to Express untouched (CORS preflights of SDK routes are answered
 * here, and their answers get CORS headers on the way).
 *
 * The edge does for its routes what the Express chain does, in the same order and with the
 * same answers: request id, per-IP limit, authentication (401 for a bad bearer), personal-token
 * refusal, per-token limit, a JSON body of at most 64 KB or the route's own limit (413/415/400); then the route's adapter
 * answers (validation, access, per-service limit, evaluation) and the edge sends it, with
 * RateLimit-* headers on every answer and Retry-After on a refusal. So a request goes edge ->
 * adapter -> service -> engine, and back once. What it skips is Express's router, middleware
 * stack and per-request access log line (errors are still logged). Rate limits are local
 * counters synced to the shared cache (local-rate-limiter.ts), so no request waits on Redis.
 */
export interface LeanDeps {
  authenticator: Authenticator;
  limiter: LocalRateLimiter;
  perIpLimit: number;
  perTokenLimit: number;
  trustProxy: number;
  logger: Logger;
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
  /** The path segment after a prefix route's prefix (percent-encoded until its adapter decodes it). */
  param: string | undefined;
  /** Spends a budget: its headers when it is the tightest so far, 429 when it refused. */
  limit(decision: RateDecision | undefined, what: string): void;
  /** X-Request-Id and the rate headers, for an answer the adapter writes itself (SSE). */
  headers(): Record<string, string | number>;
  /** Sends a JSON body (or a bare 304), with the common headers and `extra`. */
  send(status: number, body: string, extra?: Record<string, string>): void;
}

/** A route served by the edge; its adapter owns the flow from the parsed body to the answer. */
export interface LeanRoute {
  method: 'GET' | 'POST';
  /** Exact paths it answers. */
  paths?: readonly string[];
  /** Or a prefix that exactly one more path segment completes (the segment is `Exchange.param`). */
  prefix?: string;
  /** Largest body it reads (bytes); the evaluation limit, 64 KB, when absent. */
  bodyLimit?: number;
  /**
   * Answers from the parsed JSON body (undefined when there is none; GET routes read none).
   * Throws, or returns a promise that rejects, to answer an error; returns a promise only when
   * it waited (a service loaded on first use, a session's membership).
   */
  respond(ex: Exchange, body: unknown): Promise<void> | undefined;
  /** The error body of its protocol; the REST envelope when absent. */
  errorBody?(ex: Exchange, error: HttpError): Record<string, unknown>;
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
const BODY_LIMIT = BODY_LIMITS.evaluation;

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
  first: Buffer | undefined = undefined;
  chunks: Buffer[] | undefined = undefined;
  bodyDone = false;
  readonly startedAt = performance.now();

  constructor(
    readonly deps: LeanDeps,
    readonly route: LeanRoute,
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

  send(status: number, body: string, extra?: Record<string, string>): void {
    const { res } = this;
    if (res.headersSent || res.destroyed) return;
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
  const exact = { GET: new Map<string, LeanRoute>(), POST: new Map<string, LeanRoute>() };
  const prefixed = routes.filter((r) => r.prefix !== undefined);
  for (const route of routes) for (const path of route.paths ?? []) exact[route.method].set(path, route);
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
    let route = exact[method].get(path);
    let param: string | undefined;
    if (route === undefined) {
      for (const r of prefixed) {
        const prefix = r.prefix!;
        if (r.method === method && path.length > prefix.length && path.startsWith(prefix) && path.indexOf('/', prefix.length) === -1) {
          route = r;
          param = path.slice(prefix.length);
          break;
        }
      }
      if (route === undefined) return false;
    }
    begin(new LeanExchange(deps, route, req, res, requestIdOf(req.headers['x-request-id']), q === -1 ? '' : url.slice(q + 1), param));
    return true;
  };
}

function begin(ex: LeanExchange): void {
  const { deps } = ex;
  try {
    ex.limit(deps.limiter.consume(`ip:${ipBucket(clientIp(ex.req, deps.trustProxy))}`, deps.perIpLimit), 'IP address');
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
  const { deps } = ex;
  try {
    if (principal.type === 'personal_access_token') throw personalTokenRefused();
    if (principal.type === 'project_api_token') ex.limit(deps.limiter.consume(`token:${principal.tokenId}`, deps.perTokenLimit), 'API token');
    ex.principal = principal;
    ex.rateLimitMs = performance.now() - ex.startedAt;
    if (ex.route.method === 'GET') return respond(ex, undefined);
    const problem = checkBodyHeaders(ex.req.headers, ex.route.bodyLimit ?? BODY_LIMIT);
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
    const done = ex.route.respond(ex, body);
    if (done !== undefined) done.catch((error) => fail(ex, error));
  } catch (error) {
    fail(ex, error);
  }
}

function onBodyData(this: WithExchange, chunk: Buffer): void {
  const ex = this[EXCHANGE]!;
  if (ex.bodyDone) return;
  ex.bodyBytes += chunk.length;
  const limit = ex.route.bodyLimit ?? BODY_LIMIT;
  if (ex.bodyBytes > limit) {
    ex.bodyDone = true;
    fail(ex, payloadTooLarge(limit));
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
  const body = ex.route.errorBody === undefined ? http.toBody() : ex.route.errorBody(ex, http);
  ex.send(http.status, JSON.stringify(body), http.status === 413 ? { Connection: 'close' } : undefined);
}

/** The handler of a route the edge serves: documented in the OpenAPI catalog like every route, never mounted. */
export function servedByLeanPath(): never {
  throw new HttpError(500, 'served by the lean evaluation path');
}
