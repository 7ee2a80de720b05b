import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { bearerToken, type Authenticator } from '../../auth/authenticator';
import { ANONYMOUS, type Principal } from '../../auth/principal';
import { clientIp, ipBucket } from '../../http/client-ip';
import { checkBodyHeaders } from '../../http/body';
import { HttpError, badRequest, malformedJson, payloadTooLarge, personalTokenRefused, requestAborted, serviceUnavailable, tooManyRequests } from '../../http/errors';
import { rateHeaders, rateLimitMessage, tighter, type RateDecision } from '../../http/rate-limit';
import { requestIdOf } from '../../http/request-id';
import { BODY_LIMITS } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Environment } from '../flags/types';
import type { ServiceGrant } from './access';
import type { LocalRateLimiter } from './local-rate-limiter';
import { etagMatches, ofrepError, ofrepFailure, ofrepSuccess, ofrepTarget, type OfrepTarget } from './ofrep';
import { StreamQuery } from './routes';
import { EvaluateBody, OfrepBody, contextOf, validateBody, validateQuery } from './schemas';
import { STREAM_RETRY_AFTER_SECONDS, type StreamLimits } from './stream-limits';
import { openSse, type StreamClientLimits, type StreamHub } from './streams';
import { DEFAULT_ENVIRONMENT, isEnvironment, restResult, round3, type CallInfo, type EvaluationService } from './service';

/**
 * The lean path: the hottest data-plane routes served straight from node:http, in front of
 * Express (DESIGN "Quality bars"). It handles
 *   POST /api/flags/evaluate                    (REST single evaluation)
 *   POST /api/ofrep/v1/evaluate/flags/{key}     (OFREP single)
 *   POST /api/ofrep/v1/evaluate/flags           (OFREP bulk, ETag / If-None-Match)
 *   GET  /api/flags/stream, /api/connect/stream  (SSE: an open stream holds no Express or
 *                                                 per-request logger state, see bench:streams)
 * and hands every other request to Express untouched (answering CORS preflights of SDK routes
 * and adding CORS headers to their answers on the way). It does everything the Express chain
 * does for these routes, in the same order and with the same answers: request id, per-IP
 * limit, authentication (401 for a bad bearer), personal-token refusal, per-token limit,
 * JSON body of at most 64 KB (413/415/400), validation (400 with details), access (401/403/404),
 * per-service limit, RateLimit-* headers on every answer and Retry-After on 429. What it
 * skips is Express's router, middleware stack and per-request access log line (errors are
 * still logged). Rate limits are local counters synced to the shared cache (local-rate-limiter.ts),
 * so no request waits on Redis.
 */
export interface LeanDeps {
  evaluation: EvaluationService;
  hub: StreamHub;
  /** Open-stream caps (per IP, credential, service), shared with the Connect EventStream. */
  streamLimits: StreamLimits;
  /** What one SSE client may cost before it is dropped (buffered output, stall time). */
  streamClient: StreamClientLimits;
  authenticator: Authenticator;
  limiter: LocalRateLimiter;
  perIpLimit: number;
  perTokenLimit: number;
  trustProxy: number;
  logger: Logger;
}

type Kind = 'rest' | 'ofrep' | 'ofrep-bulk' | 'stream';

const REST_PATH = '/api/flags/evaluate';
const STREAM_PATHS = new Set(['/api/flags/stream', '/api/connect/stream']);
const OFREP_BULK_PATH = '/api/ofrep/v1/evaluate/flags';
const OFREP_PREFIX = '/api/ofrep/v1/evaluate/flags/';

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
    'ETag, X-Request-Id, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After, Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin',
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
interface Exchange {
  deps: LeanDeps;
  kind: Kind;
  req: IncomingMessage;
  res: ServerResponse;
  startedAt: number;
  requestId: string;
  query: string;
  ofrepKey: string | undefined;
  rate: RateDecision | undefined;
  principal: Principal;
  rateLimitMs: number;
  bodyBytes: number;
  first: Buffer | undefined;
  chunks: Buffer[] | undefined;
  bodyDone: boolean;
}

const EXCHANGE = Symbol('lean exchange');

type WithExchange = IncomingMessage & { [EXCHANGE]?: Exchange };

export function createLeanHandler(deps: LeanDeps): (req: IncomingMessage, res: ServerResponse) => boolean {
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
    let kind: Kind;
    let ofrepKey: string | undefined;
    if (req.method === 'GET') {
      if (!STREAM_PATHS.has(path)) return false;
      kind = 'stream';
    } else if (req.method !== 'POST') return false;
    else if (path === REST_PATH) kind = 'rest';
    else if (path === OFREP_BULK_PATH) kind = 'ofrep-bulk';
    else if (path.startsWith(OFREP_PREFIX) && path.length > OFREP_PREFIX.length && path.indexOf('/', OFREP_PREFIX.length) === -1) {
      kind = 'ofrep';
      ofrepKey = path.slice(OFREP_PREFIX.length);
    } else return false;
    const ex: Exchange = {
      deps,
      kind,
      req,
      res,
      startedAt: performance.now(),
      requestId: requestIdOf(req.headers['x-request-id']),
      query: q === -1 ? '' : url.slice(q + 1),
      ofrepKey,
      rate: undefined,
      principal: ANONYMOUS,
      rateLimitMs: 0,
      bodyBytes: 0,
      first: undefined,
      chunks: undefined,
      bodyDone: false,
    };
    begin(ex);
    return true;
  };
}

function begin(ex: Exchange): void {
  const { deps } = ex;
  try {
    limit(deps, ex, `ip:${ipBucket(clientIp(ex.req, deps.trustProxy))}`, deps.perIpLimit, 'IP address');
    const principal = authenticate(deps, ex.req);
    if (principal instanceof Promise) principal.then((p) => afterAuth(ex, p), (error) => fail(deps, ex, error));
    else afterAuth(ex, principal);
  } catch (error) {
    fail(deps, ex, error);
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

function afterAuth(ex: Exchange, principal: Principal): void {
  const { deps } = ex;
  try {
    if (principal.type === 'personal_access_token') throw personalTokenRefused();
    if (principal.type === 'project_api_token') limit(deps, ex, `token:${principal.tokenId}`, deps.perTokenLimit, 'API token');
    ex.principal = principal;
    ex.rateLimitMs = performance.now() - ex.startedAt;
    if (ex.kind === 'stream') return settle(ex, openStream(ex));
    const problem = checkBodyHeaders(ex.req.headers, BODY_LIMIT);
    if (problem === null) return afterBody(ex, undefined);
    if (problem !== undefined) throw problem;
    (ex.req as WithExchange)[EXCHANGE] = ex;
    ex.req.on('data', onBodyData);
    ex.req.once('end', onBodyEnd);
    ex.req.once('error', onBodyError);
  } catch (error) {
    fail(deps, ex, error);
  }
}

function afterBody(ex: Exchange, raw: unknown): void {
  try {
    settle(ex, dispatch(ex, raw));
  } catch (error) {
    fail(ex.deps, ex, error);
  }
}

/** A step that went asynchronous (a service loaded on first use, a session lookup) reports its failure too. */
function settle(ex: Exchange, done: Promise<void> | undefined): void {
  if (done !== undefined) done.catch((error) => fail(ex.deps, ex, error));
}

function dispatch(ex: Exchange, raw: unknown): Promise<void> | undefined {
  const t1 = performance.now();
  if (ex.kind === 'rest') return evaluateRest(ex, raw, t1);
  if (ex.ofrepKey !== undefined) {
    let key: string;
    try {
      key = decodeURIComponent(ex.ofrepKey);
    } catch {
      throw badRequest('The flag key in the path is not valid percent-encoding');
    }
    ex.ofrepKey = key;
    return evaluateOfrep(ex, raw, key);
  }
  return evaluateOfrepBulk(ex, raw);
}

function onBodyData(this: WithExchange, chunk: Buffer): void {
  const ex = this[EXCHANGE]!;
  if (ex.bodyDone) return;
  ex.bodyBytes += chunk.length;
  if (ex.bodyBytes > BODY_LIMIT) {
    ex.bodyDone = true;
    fail(ex.deps, ex, payloadTooLarge(BODY_LIMIT));
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
  let raw: unknown;
  try {
    raw = buffer === undefined ? undefined : JSON.parse(buffer.toString('utf8'));
  } catch {
    fail(ex.deps, ex, malformedJson());
    return;
  }
  afterBody(ex, raw);
}

function onBodyError(this: WithExchange): void {
  const ex = this[EXCHANGE]!;
  if (ex.bodyDone) return;
  ex.bodyDone = true;
  fail(ex.deps, ex, requestAborted());
}

/** GET /api/flags/stream and /api/connect/stream: validated like a route, then an SSE response. */
function openStream(ex: Exchange): Promise<void> | undefined {
  const query = validateQuery(StreamQuery, Object.fromEntries(new URLSearchParams(ex.query)));
  if (query instanceof HttpError) throw query;
  const open = (grant: ServiceGrant) => {
    if (ex.deps.hub.isClosed) throw serviceUnavailable('The server is shutting down; reconnect');
    // Gone while its service loaded: its 'close' has passed, so it must not take a slot.
    if (ex.req.socket.destroyed) return;
    const admission = ex.deps.streamLimits.acquire({ ip: ipBucket(clientIp(ex.req, ex.deps.trustProxy)), principal: ex.principal, serviceId: grant.service.id });
    if (!admission.ok) return send(ex, 429, JSON.stringify(admission.error.toBody()), { 'Retry-After': String(STREAM_RETRY_AFTER_SECONDS) });
    const lastEventId = ex.req.headers['last-event-id'];
    openSse(ex.deps.hub, ex.req, ex.res, {
      service: grant.service,
      visibility: grant.visibility,
      environment: query.environment,
      clientId: query.clientId,
      lastEventId: (typeof lastEventId === 'string' && lastEventId !== '' ? lastEventId : undefined) ?? query.lastEventId,
      headers: commonHeaders(ex),
      limits: ex.deps.streamClient,
      release: admission.release,
    });
  };
  const grant = ex.deps.evaluation.grantNow(ex.principal, query.serviceId);
  if (grant !== undefined) {
    open(grant);
    return undefined;
  }
  return ex.deps.evaluation.grant(ex.principal, query.serviceId).then(open);
}

const EVALUATE_FIELDS = new Set(['flagKey', 'serviceId', 'environment', 'defaultValue', 'context']);

/** The common valid body, checked without zod; anything unusual goes to zod for the exact 400. */
function quickEvaluateBody(raw: unknown): EvaluateBody | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  for (const key in raw) if (!EVALUATE_FIELDS.has(key)) return undefined;
  const { flagKey, serviceId, environment } = raw as Record<string, unknown>;
  if (typeof flagKey !== 'string' || flagKey.length < 1 || flagKey.length > 256) return undefined;
  if (typeof serviceId !== 'string' || serviceId.length < 1 || serviceId.length > 128) return undefined;
  if (environment !== undefined && !isEnvironment(environment)) return undefined;
  return raw as EvaluateBody;
}

function evaluateRest(ex: Exchange, raw: unknown, t1: number): Promise<void> | undefined {
  let body = quickEvaluateBody(raw);
  if (body === undefined) {
    const checked = validateBody(EvaluateBody, raw);
    if (checked instanceof HttpError) throw checked;
    body = checked;
  }
  const t2 = performance.now();
  const grant = ex.deps.evaluation.grantNow(ex.principal, body.serviceId);
  if (grant !== undefined) {
    restWithGrant(ex, body, grant, t1, t2);
    return undefined;
  }
  const valid = body;
  return ex.deps.evaluation.grant(ex.principal, body.serviceId).then((g) => restWithGrant(ex, valid, g, t1, t2));
}

function restWithGrant(ex: Exchange, body: EvaluateBody, grant: ServiceGrant, t1: number, t2: number): void {
  const { deps } = ex;
  const evaluation = deps.evaluation;
  const environment: Environment = body.environment ?? DEFAULT_ENVIRONMENT;
  evaluation.checkVisible(grant, environment, [body.flagKey]);
  const t3 = performance.now();
  spendServiceBudget(ex, grant);
  const t4 = performance.now();
  const [result] = evaluation.evaluateKeys(grant, environment, [{ flagKey: body.flagKey, defaultValue: body.defaultValue }], contextOf(body.context), call(ex));
  const t5 = performance.now();
  const out = restResult(result);
  if (ex.query !== '' && wantsDebug(ex.query)) {
    out._debug = {
      timings: { rateLimit: round3(ex.rateLimitMs + (t4 - t3)), validation: round3(t2 - t1), cacheGet: round3(t3 - t2), evaluate: round3(t5 - t4) },
      cacheHit: grant.cacheHit,
      totalMs: round3(t5 - ex.startedAt),
    };
  }
  send(ex, 200, JSON.stringify(out));
}

/** An OFREP request body: any JSON object (or none); zod only for the exact 400 otherwise. */
function ofrepBody(raw: unknown): { context?: unknown } {
  if (raw === undefined) return {};
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) return raw as { context?: unknown };
  const checked = validateBody(OfrepBody, raw);
  if (checked instanceof HttpError) throw checked;
  return checked;
}

function evaluateOfrep(ex: Exchange, raw: unknown, key: string): Promise<void> | undefined {
  const target = ofrepTarget(ex.req.headers);
  if (target instanceof HttpError) throw target;
  const body = ofrepBody(raw);
  const grant = ex.deps.evaluation.grantNow(ex.principal, target.serviceId);
  if (grant !== undefined) {
    ofrepWithGrant(ex, target, body.context, key, grant);
    return undefined;
  }
  return ex.deps.evaluation.grant(ex.principal, target.serviceId).then((g) => ofrepWithGrant(ex, target, body.context, key, g));
}

function ofrepWithGrant(ex: Exchange, target: OfrepTarget, context: unknown, key: string, grant: ServiceGrant): void {
  const { deps } = ex;
  const evaluation = deps.evaluation;
  evaluation.checkVisible(grant, target.environment, [key]);
  spendServiceBudget(ex, grant);
  const [result] = evaluation.evaluateKeys(grant, target.environment, [{ flagKey: key }], contextOf(context), call(ex));
  if (result.reason === 'ERROR') {
    const failure = ofrepFailure(result);
    return send(ex, failure.status, JSON.stringify(failure.body));
  }
  const entry = grant.service.environments[target.environment].get(key);
  send(ex, 200, JSON.stringify(ofrepSuccess(result, entry ? { flagVersion: entry.record.version } : {})));
}

function evaluateOfrepBulk(ex: Exchange, raw: unknown): Promise<void> | undefined {
  const target = ofrepTarget(ex.req.headers);
  if (target instanceof HttpError) throw target;
  const body = ofrepBody(raw);
  const grant = ex.deps.evaluation.grantNow(ex.principal, target.serviceId);
  if (grant !== undefined) {
    bulkWithGrant(ex, target, body.context, grant);
    return undefined;
  }
  return ex.deps.evaluation.grant(ex.principal, target.serviceId).then((g) => bulkWithGrant(ex, target, body.context, g));
}

function bulkWithGrant(ex: Exchange, target: OfrepTarget, rawContext: unknown, grant: ServiceGrant): void {
  const { deps } = ex;
  const evaluation = deps.evaluation;
  spendServiceBudget(ex, grant);
  const context = contextOf(rawContext);
  if (typeof context !== 'object' || context === null || Array.isArray(context)) {
    throw new HttpError(400, 'context must be an object', { details: [{ path: 'body.context', message: 'Expected object' }] }, undefined, 'invalid_context');
  }
  const snapshot = grant.service.environments[target.environment];
  // The answer depends on the visible flags and on the context: both go into the ETag.
  const etag = `W/"${createHash('sha1').update(snapshot.etag(grant.visibility)).update(JSON.stringify(context)).digest('hex').slice(0, 24)}"`;
  const extra = { ETag: etag, 'Cache-Control': 'private, no-cache' };
  const ifNoneMatch = ex.req.headers['if-none-match'];
  if (etagMatches(typeof ifNoneMatch === 'string' ? ifNoneMatch : undefined, etag)) return send(ex, 304, '', extra);
  const results = evaluation.evaluateVisible(grant, target.environment, context, call(ex));
  const flags = results.map((r) => {
    if (r.reason === 'ERROR') return ofrepFailure(r).body;
    const entry = snapshot.get(r.flagKey);
    return ofrepSuccess(r, entry ? { flagVersion: entry.record.version } : {});
  });
  send(ex, 200, JSON.stringify({ flags }), extra);
}

function call(ex: Exchange): CallInfo {
  return { source: ex.kind === 'rest' ? 'rest' : 'ofrep', startedAt: ex.startedAt, bodyBytes: ex.bodyBytes };
}

function wantsDebug(query: string): boolean {
  return query !== '' && new URLSearchParams(query).get('debug') === 'true';
}

/** The per-service budget, for callers who read the service (EvaluationService.consumeServiceBudget). */
function spendServiceBudget(ex: Exchange, grant: ServiceGrant) {
  const d = ex.deps.evaluation.consumeServiceBudget(grant);
  if (d !== undefined) limitDecision(ex, d, 'service', ex.deps.limiter.windowSeconds);
}

function limit(deps: LeanDeps, ex: Exchange, bucket: string, max: number, what: string) {
  limitDecision(ex, deps.limiter.consume(bucket, max), what, deps.limiter.windowSeconds);
}

/** Keeps the tightest budget for the headers and throws 429 past one. */
function limitDecision(ex: Exchange, d: RateDecision, what: string, windowSeconds: number) {
  ex.rate = tighter(ex.rate, d);
  if (!d.allowed) throw tooManyRequests(rateLimitMessage(d.limit, windowSeconds, what));
}

function fail(deps: LeanDeps, ex: Exchange, error: unknown) {
  let http: HttpError;
  if (error instanceof HttpError) http = error;
  else {
    deps.logger.error({ err: error, requestId: ex.requestId, path: ex.req.url?.split('?')[0] }, 'request failed');
    http = new HttpError(500, 'Internal server error');
  }
  const extra: Record<string, string> = {};
  if (http.status === 413) extra.Connection = 'close';
  const body = ex.kind === 'rest' || ex.kind === 'stream' ? http.toBody() : ofrepError(http, ex.kind === 'ofrep' ? ex.ofrepKey : undefined);
  send(ex, http.status, JSON.stringify(body), extra);
}

/** X-Request-Id, and the RateLimit-* headers of the tightest budget (Retry-After when it refused). */
function commonHeaders(ex: Exchange): Record<string, string | number> {
  const headers = ex.rate === undefined ? {} : rateHeaders(ex.rate);
  headers['X-Request-Id'] = ex.requestId;
  return headers;
}

function send(ex: Exchange, status: number, body: string, extra?: Record<string, string>) {
  const { res } = ex;
  if (res.headersSent || res.destroyed) return;
  const headers = commonHeaders(ex);
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
