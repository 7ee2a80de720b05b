import { createHash, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Authenticator } from '../../auth/authenticator';
import type { Principal } from '../../auth/principal';
import { clientIp } from '../../http/client-ip';
import { HttpError, payloadTooLarge, tooManyRequests, unsupportedMediaType, badRequest } from '../../http/errors';
import type { RateDecision } from '../../http/rate-limit';
import { BODY_LIMITS } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Environment } from '../flags/types';
import { personalTokenRefused } from './access';
import type { LocalRateLimiter } from './local-rate-limiter';
import { etagMatches, ofrepError, ofrepFailure, ofrepSuccess, ofrepTarget } from './ofrep';
import { EvaluateBody, OfrepBody, contextOf, validateBody } from './schemas';
import { DEFAULT_ENVIRONMENT, restResult, round3, type CallInfo, type EvaluationService } from './service';

/**
 * The lean path: the hottest data-plane routes served straight from node:http, in front of
 * Express (DESIGN "Quality bars"). It handles
 *   POST /api/flags/evaluate                    (REST single evaluation)
 *   POST /api/ofrep/v1/evaluate/flags/{key}     (OFREP single)
 *   POST /api/ofrep/v1/evaluate/flags           (OFREP bulk, ETag / If-None-Match)
 * and hands every other request to Express untouched. It does everything the Express chain
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
  authenticator: Authenticator;
  limiter: LocalRateLimiter;
  perIpLimit: number;
  perTokenLimit: number;
  trustProxy: number;
  logger: Logger;
}

type Kind = 'rest' | 'ofrep' | 'ofrep-bulk';

const REST_PATH = '/api/flags/evaluate';
const OFREP_BULK_PATH = '/api/ofrep/v1/evaluate/flags';
const OFREP_PREFIX = '/api/ofrep/v1/evaluate/flags/';
const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;
const JSON_TYPE = /^application\/(?:[^;\s]+\+)?json\s*(?:;|$)/i;
const BODY_LIMIT = BODY_LIMITS.evaluation;

/** Per-request state threaded through the steps (one object, no closures). */
interface Exchange {
  kind: Kind;
  req: IncomingMessage;
  res: ServerResponse;
  startedAt: number;
  requestId: string;
  query: string;
  ofrepKey: string | undefined;
  rate: RateDecision | undefined;
  bodyBytes: number;
}

export function createLeanHandler(deps: LeanDeps): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    let kind: Kind;
    let ofrepKey: string | undefined;
    if (path === REST_PATH) kind = 'rest';
    else if (path === OFREP_BULK_PATH) kind = 'ofrep-bulk';
    else if (path.startsWith(OFREP_PREFIX) && path.length > OFREP_PREFIX.length && path.indexOf('/', OFREP_PREFIX.length) === -1) {
      kind = 'ofrep';
      ofrepKey = path.slice(OFREP_PREFIX.length);
    } else return false;
    const incoming = req.headers['x-request-id'];
    const ex: Exchange = {
      kind,
      req,
      res,
      startedAt: performance.now(),
      requestId: typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID(),
      query: q === -1 ? '' : url.slice(q + 1),
      ofrepKey,
      rate: undefined,
      bodyBytes: 0,
    };
    handle(deps, ex).catch((error) => fail(deps, ex, error));
    return true;
  };
}

async function handle(deps: LeanDeps, ex: Exchange): Promise<void> {
  const { req } = ex;
  const t0 = ex.startedAt;
  limit(deps, ex, `ip:${clientIp(req, deps.trustProxy)}`, deps.perIpLimit, 'IP address');
  const principal: Principal = await deps.authenticator.authenticate(req as never);
  if (principal.type === 'personal_access_token') throw personalTokenRefused();
  if (principal.type === 'project_api_token') limit(deps, ex, `token:${principal.tokenId}`, deps.perTokenLimit, 'API token');
  const rateLimitMs = performance.now() - t0;

  const raw = await readJson(req, ex);
  const t1 = performance.now();
  if (ex.kind === 'rest') return evaluateRest(deps, ex, principal, raw, t1, rateLimitMs);
  if (ex.ofrepKey !== undefined) {
    let key: string;
    try {
      key = decodeURIComponent(ex.ofrepKey);
    } catch {
      throw badRequest('The flag key in the path is not valid percent-encoding');
    }
    ex.ofrepKey = key;
    return evaluateOfrep(deps, ex, principal, raw, key);
  }
  return evaluateOfrepBulk(deps, ex, principal, raw);
}

async function evaluateRest(deps: LeanDeps, ex: Exchange, principal: Principal, raw: unknown, t1: number, rateLimitMs: number) {
  const body = validateBody(EvaluateBody, raw);
  if (body instanceof HttpError) throw body;
  const t2 = performance.now();
  const environment: Environment = body.environment ?? DEFAULT_ENVIRONMENT;
  const evaluation = deps.evaluation;
  const grant = evaluation.grantNow(principal, body.serviceId) ?? (await evaluation.grant(principal, body.serviceId));
  evaluation.checkVisible(grant, environment, [body.flagKey]);
  const t3 = performance.now();
  limitDecision(ex, evaluation.consumeServiceBudget(body.serviceId), 'service', deps.limiter.windowSeconds);
  const t4 = performance.now();
  const [result] = evaluation.evaluateKeys(grant, environment, [{ flagKey: body.flagKey, defaultValue: body.defaultValue }], contextOf(body.context), call(ex));
  const t5 = performance.now();
  const out = restResult(result);
  if (wantsDebug(ex.query)) {
    out._debug = {
      timings: { rateLimit: round3(rateLimitMs + (t4 - t3)), validation: round3(t2 - t1), cacheGet: round3(t3 - t2), evaluate: round3(t5 - t4) },
      cacheHit: grant.cacheHit,
      totalMs: round3(t5 - ex.startedAt),
    };
  }
  send(ex, 200, JSON.stringify(out));
}

async function evaluateOfrep(deps: LeanDeps, ex: Exchange, principal: Principal, raw: unknown, key: string) {
  const target = ofrepTarget(ex.req.headers);
  if (target instanceof HttpError) throw target;
  const body = validateBody(OfrepBody, raw ?? {});
  if (body instanceof HttpError) throw body;
  const evaluation = deps.evaluation;
  const grant = evaluation.grantNow(principal, target.serviceId) ?? (await evaluation.grant(principal, target.serviceId));
  evaluation.checkVisible(grant, target.environment, [key]);
  limitDecision(ex, evaluation.consumeServiceBudget(target.serviceId), 'service', deps.limiter.windowSeconds);
  const [result] = evaluation.evaluateKeys(grant, target.environment, [{ flagKey: key }], contextOf(body.context), call(ex));
  if (result.reason === 'ERROR') {
    const failure = ofrepFailure(result);
    return send(ex, failure.status, JSON.stringify(failure.body));
  }
  const entry = grant.service.environments[target.environment].get(key);
  send(ex, 200, JSON.stringify(ofrepSuccess(result, entry ? { flagVersion: entry.record.version } : {})));
}

async function evaluateOfrepBulk(deps: LeanDeps, ex: Exchange, principal: Principal, raw: unknown) {
  const target = ofrepTarget(ex.req.headers);
  if (target instanceof HttpError) throw target;
  const body = validateBody(OfrepBody, raw ?? {});
  if (body instanceof HttpError) throw body;
  const evaluation = deps.evaluation;
  const grant = evaluation.grantNow(principal, target.serviceId) ?? (await evaluation.grant(principal, target.serviceId));
  limitDecision(ex, evaluation.consumeServiceBudget(target.serviceId), 'service', deps.limiter.windowSeconds);
  const context = contextOf(body.context);
  if (typeof context !== 'object' || context === null || Array.isArray(context)) {
    throw new HttpError(400, 'context must be an object', { details: [{ path: 'body.context', message: 'Expected object' }] });
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

function limit(deps: LeanDeps, ex: Exchange, bucket: string, max: number, what: string) {
  limitDecision(ex, deps.limiter.consume(bucket, max), what, deps.limiter.windowSeconds);
}

/** Keeps the tightest budget for the headers (as applyRateHeaders does) and throws 429 past one. */
function limitDecision(ex: Exchange, d: RateDecision, what: string, windowSeconds: number) {
  const current = ex.rate;
  if (current === undefined || d.remaining / d.limit < current.remaining / current.limit) ex.rate = d;
  if (!d.allowed) throw tooManyRequests(`Rate limit exceeded: ${d.limit} requests per ${windowSeconds} seconds per ${what}`);
}

/** The JSON body (undefined when there is none), with the evaluation size limit of spec 8. */
function readJson(req: IncomingMessage, ex: Exchange): Promise<unknown> {
  const length = req.headers['content-length'];
  const declared = length === undefined ? undefined : Number(length);
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (!chunked && (declared === undefined || declared === 0)) return Promise.resolve(undefined);
  const type = req.headers['content-type'];
  if (type === undefined || !JSON_TYPE.test(type)) return Promise.reject(unsupportedMediaType());
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') return Promise.reject(new HttpError(415, 'Unsupported body encoding'));
  if (declared !== undefined && declared > BODY_LIMIT) return Promise.reject(payloadTooLarge(BODY_LIMIT));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT) {
        req.off('data', onData);
        reject(payloadTooLarge(BODY_LIMIT));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('error', () => reject(new HttpError(400, 'Request aborted')));
    req.once('end', () => {
      ex.bodyBytes = size;
      const text = chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8');
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(badRequest('Malformed JSON body'));
      }
    });
  });
}

function fail(deps: LeanDeps, ex: Exchange, error: unknown) {
  let http: HttpError;
  if (error instanceof HttpError) http = error;
  else {
    deps.logger.error({ err: error, requestId: ex.requestId, path: ex.req.url?.split('?')[0] }, 'request failed');
    http = new HttpError(500, 'Internal server error');
  }
  const extra: Record<string, string> = {};
  if (http.status === 429 && ex.rate) extra['Retry-After'] = String(Math.max(1, ex.rate.reset - Math.floor(Date.now() / 1000)));
  if (http.status === 413) extra.Connection = 'close';
  const body = ex.kind === 'rest' ? http.toBody() : ofrepError(http, ex.kind === 'ofrep' ? ex.ofrepKey : undefined);
  send(ex, http.status, JSON.stringify(body), extra);
}

function send(ex: Exchange, status: number, body: string, extra?: Record<string, string>) {
  const { res } = ex;
  if (res.headersSent || res.destroyed) return;
  const headers: Record<string, string | number> = { 'X-Request-Id': ex.requestId };
  const rate = ex.rate;
  if (rate !== undefined) {
    headers['RateLimit-Limit'] = rate.limit;
    headers['RateLimit-Remaining'] = rate.remaining;
    headers['RateLimit-Reset'] = rate.reset;
  }
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
