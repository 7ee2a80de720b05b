import { createHash } from 'node:crypto';
import { z } from 'zod';
import { HttpError, badRequest, type ErrorCode } from '../../http/errors';
import { HANDLED, defineRoute, type AnyRoute, type RequestContext } from '../../http/route';
import type { Environment } from '../flags/types';
import type { ServiceGrant } from './access';
import type { EvaluationResult } from './engine/index';
import { servedByLeanPath, type Exchange, type LeanRoute } from './lean';
import { OfrepBody, contextOf, validateBody } from './schemas';
import { DEFAULT_ENVIRONMENT, isEnvironment, type EvaluationService } from './service';

/**
 * OpenFeature Remote Evaluation Protocol (OFREP) v1 under /api/ofrep/v1/. The service is named
 * by the `X-Service-Id` header and the environment by `X-Environment` (default development).
 * Single and bulk evaluation are served on the lean edge (lean.ts); configuration is an
 * Express route.
 *
 * Status codes follow the OFREP OpenAPI document: 200 success, 400 {key, errorCode,
 * errorDetails} for evaluation errors, 404 FLAG_NOT_FOUND, 401/403/429 for access and rate
 * limits, 304 for an unchanged bulk answer. Error bodies also carry our `{error, message}`.
 */

export const OFREP_POLLING_INTERVAL_MS = 30_000;

const EVALUATE_PATH = '/api/ofrep/v1/evaluate/flags';

/** OFREP single and bulk evaluation on the lean edge. */
export function ofrepEvaluateRoutes(evaluation: EvaluationService): LeanRoute[] {
  return [
    {
      method: 'POST',
      prefix: `${EVALUATE_PATH}/`,
      respond: (ex, raw) => evaluateOne(evaluation, ex, raw),
      errorBody: (ex, error) => ofrepError(error, ex.param),
    },
    {
      method: 'POST',
      paths: [EVALUATE_PATH],
      respond: (ex, raw) => evaluateAll(evaluation, ex, raw),
      errorBody: (_ex, error) => ofrepError(error, undefined),
    },
  ];
}

/** POST /api/ofrep/v1/evaluate/flags/{key}: target headers, body, access, per-service budget, evaluation. */
function evaluateOne(evaluation: EvaluationService, ex: Exchange, raw: unknown): Promise<void> | undefined {
  let key: string;
  try {
    key = decodeURIComponent(ex.param!);
  } catch {
    throw badRequest('The flag key in the path is not valid percent-encoding');
  }
  ex.param = key;
  const target = ofrepTarget(ex.req.headers);
  if (target instanceof HttpError) throw target;
  const { context } = ofrepBody(raw);
  const grant = evaluation.grantNow(ex.principal, target.serviceId);
  if (grant === undefined) return evaluation.grant(ex.principal, target.serviceId).then((g) => answerOne(evaluation, ex, target, context, key, g));
  answerOne(evaluation, ex, target, context, key, grant);
  return undefined;
}

function answerOne(evaluation: EvaluationService, ex: Exchange, target: OfrepTarget, context: unknown, key: string, grant: ServiceGrant): void {
  evaluation.checkVisible(grant, target.environment, [key]);
  ex.limit(evaluation.consumeServiceBudget(grant), 'service');
  const [result] = evaluation.evaluateKeys(grant, target.environment, [{ flagKey: key }], contextOf(context), {
    source: 'ofrep',
    startedAt: ex.startedAt,
    bodyBytes: ex.bodyBytes,
  });
  if (result.reason === 'ERROR') {
    const failure = ofrepFailure(result);
    return ex.send(failure.status, JSON.stringify(failure.body));
  }
  const entry = grant.service.environments[target.environment].get(key);
  ex.send(200, JSON.stringify(ofrepSuccess(result, entry ? { flagVersion: entry.record.version } : {})));
}

/** POST /api/ofrep/v1/evaluate/flags: every flag the caller may see, 304 when its ETag still matches. */
function evaluateAll(evaluation: EvaluationService, ex: Exchange, raw: unknown): Promise<void> | undefined {
  const target = ofrepTarget(ex.req.headers);
  if (target instanceof HttpError) throw target;
  const { context } = ofrepBody(raw);
  const grant = evaluation.grantNow(ex.principal, target.serviceId);
  if (grant === undefined) return evaluation.grant(ex.principal, target.serviceId).then((g) => answerAll(evaluation, ex, target, context, g));
  answerAll(evaluation, ex, target, context, grant);
  return undefined;
}

function answerAll(evaluation: EvaluationService, ex: Exchange, target: OfrepTarget, rawContext: unknown, grant: ServiceGrant): void {
  ex.limit(evaluation.consumeServiceBudget(grant), 'service');
  const context = contextOf(rawContext);
  if (typeof context !== 'object' || context === null || Array.isArray(context)) {
    throw new HttpError(400, 'context must be an object', { details: [{ path: 'body.context', message: 'Expected object' }] }, undefined, 'invalid_context');
  }
  const snapshot = grant.service.environments[target.environment];
  // The answer depends on the visible flags and on the context: both go into the ETag.
  const etag = `W/"${createHash('sha1').update(snapshot.etag(grant.visibility)).update(JSON.stringify(context)).digest('hex').slice(0, 24)}"`;
  const extra = { ETag: etag, 'Cache-Control': 'private, no-cache' };
  const ifNoneMatch = ex.req.headers['if-none-match'];
  if (etagMatches(typeof ifNoneMatch === 'string' ? ifNoneMatch : undefined, etag)) return ex.send(304, '', extra);
  const results = evaluation.evaluateVisible(grant, target.environment, context, { source: 'ofrep', startedAt: ex.startedAt, bodyBytes: ex.bodyBytes });
  const flags = results.map((r) => {
    if (r.reason === 'ERROR') return ofrepFailure(r).body;
    const entry = snapshot.get(r.flagKey);
    return ofrepSuccess(r, entry ? { flagVersion: entry.record.version } : {});
  });
  ex.send(200, JSON.stringify({ flags }), extra);
}

interface OfrepTarget {
  serviceId: string;
  environment: Environment;
}

function ofrepTarget(headers: Record<string, string | string[] | undefined>): OfrepTarget | HttpError {
  const serviceId = single(headers['x-service-id']);
  if (!serviceId) return new HttpError(400, 'The X-Service-Id header is required');
  const env = single(headers['x-environment']);
  if (env !== undefined && !isEnvironment(env)) return new HttpError(400, 'X-Environment must be development, staging or production');
  return { serviceId, environment: (env as Environment | undefined) ?? DEFAULT_ENVIRONMENT };
}

function single(v: string | string[] | undefined): string | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}

/** An OFREP request body: any JSON object (or none); zod only for the exact 400 otherwise. */
function ofrepBody(raw: unknown): { context?: unknown } {
  if (raw === undefined) return {};
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) return raw as { context?: unknown };
  const checked = validateBody(OfrepBody, raw);
  if (checked instanceof HttpError) throw checked;
  return checked;
}

/** CONTRACT 4: a disabled flag reports DISABLED over OFREP; other reasons are the same words. */
function ofrepReason(r: EvaluationResult): string {
  return r.disabled ? 'DISABLED' : r.reason;
}

function ofrepSuccess(r: EvaluationResult, metadata: Record<string, string | number | boolean>): Record<string, unknown> {
  const out: Record<string, unknown> = { key: r.flagKey, value: r.value, reason: ofrepReason(r) };
  if (r.variant !== undefined) out.variant = r.variant;
  out.metadata = metadata;
  return out;
}

/** An evaluation ERROR as OFREP answers it: 404 for FLAG_NOT_FOUND, 400 for the rest. */
function ofrepFailure(r: EvaluationResult): { status: number; body: Record<string, unknown> } {
  const status = r.errorCode === 'FLAG_NOT_FOUND' ? 404 : 400;
  return { status, body: { key: r.flagKey, errorCode: r.errorCode ?? 'GENERAL', errorDetails: r.errorMessage ?? '' } };
}

/** OFREP error codes of our error codes; everything else is GENERAL. */
const OFREP_ERROR_CODES: Partial<Record<ErrorCode, string>> = {
  personal_token_refused: 'PROVIDER_NOT_READY',
  not_found: 'FLAG_NOT_FOUND',
  invalid_context: 'INVALID_CONTEXT',
  malformed_json: 'PARSE_ERROR',
};

/** An access or request error in OFREP form (plus our envelope); `key` on the single-flag route. */
function ofrepError(error: HttpError, key: string | undefined): Record<string, unknown> {
  const errorCode = OFREP_ERROR_CODES[error.code] ?? 'GENERAL';
  return { ...(key === undefined ? {} : { key }), errorCode, errorDetails: error.message, ...error.toBody() };
}

/** True when an If-None-Match header lists this ETag (weak comparison, `*` matches). */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const strip = (t: string) => t.trim().replace(/^W\//, '');
  const want = strip(etag);
  return header.split(',').some((t) => t.trim() === '*' || strip(t) === want);
}

const ConfigurationSchema = z.object({
  name: z.string(),
  capabilities: z.object({
    cacheInvalidation: z.object({ polling: z.object({ enabled: z.boolean(), minPollingIntervalMs: z.number() }) }),
    flagEvaluation: z.object({ supportedTypes: z.array(z.string()) }),
  }),
});

const CONFIGURATION = {
  name: 'flagship',
  capabilities: {
    cacheInvalidation: { polling: { enabled: true, minPollingIntervalMs: OFREP_POLLING_INTERVAL_MS } },
    flagEvaluation: { supportedTypes: ['boolean', 'string', 'int', 'float', 'object'] },
  },
};
const CONFIGURATION_ETAG = `"${createHash('sha256').update(JSON.stringify(CONFIGURATION)).digest('hex').slice(0, 16)}"`;

const OfrepHeaders = {
  'x-service-id': 'Service whose flags are evaluated',
  'x-environment': 'development (default), staging or production',
};

/** Documentation of the routes served on the lean edge (registered in the OpenAPI catalog, never mounted). */
export const ofrepSingleDoc: AnyRoute = defineRoute({
  method: 'post',
  path: '/api/ofrep/v1/evaluate/flags/:key',
  summary: `OFREP single-flag evaluation (headers: ${Object.entries(OfrepHeaders).map(([h, d]) => `${h}: ${d}`).join('; ')})`,
  tags: ['ofrep'],
  auth: 'public',
  sdk: true,
  access: { capability: 'flags:read', per: 'flag' },
  params: z.object({ key: z.string() }),
  body: OfrepBody,
  response: z.object({ key: z.string(), value: z.unknown(), reason: z.string(), variant: z.string().optional(), metadata: z.record(z.unknown()) }),
  handler: servedByLeanPath,
});

export const ofrepBulkDoc: AnyRoute = defineRoute({
  method: 'post',
  path: '/api/ofrep/v1/evaluate/flags',
  summary: 'OFREP bulk evaluation of every flag the caller may see (ETag / If-None-Match; headers X-Service-Id, X-Environment)',
  tags: ['ofrep'],
  auth: 'public',
  sdk: true,
  access: { capability: 'flags:read', per: 'flag' },
  body: OfrepBody,
  response: z.object({ flags: z.array(z.record(z.unknown())) }),
  handler: servedByLeanPath,
});

export function ofrepRoutes(): AnyRoute[] {
  const configuration = (ctx: RequestContext<unknown, unknown, unknown>) => {
    ctx.res.setHeader('ETag', CONFIGURATION_ETAG);
    ctx.res.setHeader('Cache-Control', 'public, max-age=300');
    if (etagMatches(ctx.req.get('if-none-match'), CONFIGURATION_ETAG)) {
      ctx.res.status(304).end();
      return HANDLED;
    }
    return CONFIGURATION;
  };

  return [
    defineRoute({
      method: 'get',
      path: '/api/ofrep/v1/configuration',
      summary: 'OFREP provider configuration: polling interval and supported types',
      tags: ['ofrep'],
      auth: 'public',
      sdk: true,
      response: ConfigurationSchema,
      handler: configuration,
    }),
    defineRoute({
      method: 'get',
      path: '/api/ofrep/v1/metadata',
      summary: 'OFREP provider metadata (same document as /api/ofrep/v1/configuration)',
      tags: ['ofrep'],
      auth: 'public',
      sdk: true,
      response: ConfigurationSchema,
      handler: configuration,
    }),
  ];
}
