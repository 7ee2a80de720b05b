import { createHash } from 'node:crypto';
import { z } from 'zod';
import { HttpError, type ErrorCode } from '../../http/errors';
import { HANDLED, defineRoute, type AnyRoute, type RequestContext } from '../../http/route';
import type { Environment } from '../flags/types';
import type { EvaluationResult } from './engine/index';
import { OfrepBody } from './schemas';
import { DEFAULT_ENVIRONMENT, isEnvironment } from './service';

/**
 * OpenFeature Remote Evaluation Protocol (OFREP) v1 under /api/ofrep/v1/. The service is named
 * by the `X-Service-Id` header and the environment by `X-Environment` (default development).
 * Single and bulk evaluation are served by the lean path (lean.ts); configuration is here.
 *
 * Status codes follow the OFREP OpenAPI document: 200 success, 400 {key, errorCode,
 * errorDetails} for evaluation errors, 404 FLAG_NOT_FOUND, 401/403/429 for access and rate
 * limits, 304 for an unchanged bulk answer. Error bodies also carry our `{error, message}`.
 */

export const OFREP_POLLING_INTERVAL_MS = 30_000;

/** CONTRACT 4: a disabled flag reports DISABLED over OFREP; other reasons are the same words. */
export function ofrepReason(r: EvaluationResult): string {
  return r.disabled ? 'DISABLED' : r.reason;
}

export function ofrepSuccess(r: EvaluationResult, metadata: Record<string, string | number | boolean>): Record<string, unknown> {
  const out: Record<string, unknown> = { key: r.flagKey, value: r.value, reason: ofrepReason(r) };
  if (r.variant !== undefined) out.variant = r.variant;
  out.metadata = metadata;
  return out;
}

/** An evaluation ERROR as OFREP answers it: 404 for FLAG_NOT_FOUND, 400 for the rest. */
export function ofrepFailure(r: EvaluationResult): { status: number; body: Record<string, unknown> } {
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

/** An access or request error in OFREP form (plus our envelope), for the single-flag route. */
export function ofrepError(error: HttpError, key: string | undefined): Record<string, unknown> {
  const errorCode = OFREP_ERROR_CODES[error.code] ?? 'GENERAL';
  return { ...(key === undefined ? {} : { key }), errorCode, errorDetails: error.message, ...error.toBody() };
}

export interface OfrepTarget {
  serviceId: string;
  environment: Environment;
}

export function ofrepTarget(headers: Record<string, string | string[] | undefined>): OfrepTarget | HttpError {
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

/** Documentation of the routes lean.ts serves (registered in the OpenAPI catalog, never mounted). */
export const ofrepSingleDoc: AnyRoute = defineRoute({
  method: 'post',
  path: '/api/ofrep/v1/evaluate/flags/:key',
  summary: `OFREP single-flag evaluation (headers: ${Object.entries(OfrepHeaders).map(([h, d]) => `${h}: ${d}`).join('; ')})`,
  tags: ['ofrep'],
  auth: 'public',
  sdk: true,
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
  body: OfrepBody,
  response: z.object({ flags: z.array(z.record(z.unknown())) }),
  handler: servedByLeanPath,
});

export function servedByLeanPath(): never {
  throw new HttpError(500, 'served by the lean evaluation path');
}

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
