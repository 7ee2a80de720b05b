import { performance } from 'node:perf_hooks';
import { z, type ZodType, type ZodTypeDef } from 'zod';
import { HttpError, validationFailed } from '../../http/errors';
import { BODY_LIMITS } from '../../http/route';
import { PER_SERVICE } from '../../http/rate-limit';
import type { Environment } from '../../domain/environments';
import { targetEnvironment, targetService, type ServiceGrant } from './access';
import { perInternedResult, type EvaluationResult } from './engine/index';
import { EVALUATION_POLICY, defineLeanRoute, type Exchange, type LeanRoute } from './lean';
import { BATCH_LIMIT, BatchBody, DEMO_BATCH_LIMIT, DebugQuery, EvaluateBody, EvaluationResultSchema, contextOf, quickBatchBody, validateBody } from './schemas';
import { DEFAULT_ENVIRONMENT, isEnvironment, type EvaluationService, type FlagRequest } from './service';

/**
 * REST evaluation (docs/evaluation.md#results), both on the lean edge (lean.ts): POST
 * /api/flags/evaluate, one flag, and POST /api/flags/evaluate/batch, up to 100 flags (4,096 on a
 * demo service). Both answer `{flagKey, value, reason, variant?, errorCode?, errorMessage?}` per
 * flag and add
 * `_debug` timings with `?debug=true`.
 */

/** `_debug` of a result (docs/evaluation.md#results), in milliseconds. */
interface DebugInfo {
  timings: { rateLimit: number; validation: number; cacheGet: number; evaluate: number };
  cacheHit: boolean;
  totalMs: number;
}

/** Batch bodies may name 4,096 flags (demo service), more than the 64 KB single-evaluation limit allows. */
export const BATCH_BODY_LIMIT = 512 * 1024;

/** REST single evaluation on the lean edge: body, access, per-service budget, evaluation, answer. */
export function restEvaluateRoute(evaluation: EvaluationService): LeanRoute {
  return defineLeanRoute({
    method: 'post',
    path: '/api/flags/evaluate',
    summary: 'Evaluate one flag for a context (public flags need no credential; `?debug=true` adds _debug timings)',
    tags: ['evaluation'],
    ...EVALUATION_POLICY,
    bodyLimit: BODY_LIMITS.evaluation,
    query: DebugQuery,
    body: EvaluateBody,
    response: EvaluationResultSchema,
    respond: (ex, raw) => evaluateWith(evaluation, ex, raw, quickEvaluateBody, EvaluateBody, answerOne),
  });
}

/**
 * The flow both REST routes share: the body (the hand-written check of the common valid body
 * first, zod for anything unusual and its exact 400), then the caller's grant on the service,
 * at hand or loaded first, then the route's answer.
 */
function evaluateWith<B extends { serviceId?: string }>(
  evaluation: EvaluationService,
  ex: Exchange,
  raw: unknown,
  quick: (raw: unknown) => B | undefined,
  schema: ZodType<B, ZodTypeDef, unknown>,
  answer: (evaluation: EvaluationService, ex: Exchange, body: B, grant: ServiceGrant, t1: number, t2: number) => void,
): Promise<void> | undefined {
  const t1 = performance.now();
  let body = quick(raw);
  if (body === undefined) {
    const checked = validateBody(schema, raw);
    if (checked instanceof HttpError) throw checked;
    body = checked;
  }
  const t2 = performance.now();
  const serviceId = targetService(ex.principal, body.serviceId);
  if (serviceId === undefined) throw validationFailed([{ path: 'body.serviceId', message: 'Required' }]);
  const grant = evaluation.grantNow(ex.principal, serviceId);
  if (grant === undefined) {
    const valid = body;
    return evaluation.grant(ex.principal, serviceId).then((g) => answer(evaluation, ex, valid, g, t1, t2));
  }
  answer(evaluation, ex, body, grant, t1, t2);
  return undefined;
}

function answerOne(evaluation: EvaluationService, ex: Exchange, body: EvaluateBody, grant: ServiceGrant, t1: number, t2: number): void {
  const environment: Environment = targetEnvironment(ex.principal, body.environment) ?? DEFAULT_ENVIRONMENT;
  evaluation.checkVisible(grant, environment, [body.flagKey]);
  const t3 = performance.now();
  ex.limit(evaluation.consumeServiceBudget(grant), PER_SERVICE.what);
  const t4 = performance.now();
  const [result] = evaluation.evaluateKeys(grant, environment, [{ flagKey: body.flagKey, defaultValue: body.defaultValue }], contextOf(body.context), {
    source: 'rest',
    startedAt: ex.startedAt,
    bodyBytes: ex.bodyBytes,
  });
  const t5 = performance.now();
  const out = restResult(result);
  if (ex.query !== '' && new URLSearchParams(ex.query).get('debug') === 'true') {
    const debug: DebugInfo = {
      timings: { rateLimit: round3(ex.rateLimitMs + (t4 - t3)), validation: round3(t2 - t1), cacheGet: round3(t3 - t2), evaluate: round3(t5 - t4) },
      cacheHit: grant.cacheHit,
      totalMs: round3(t5 - ex.startedAt),
    };
    out._debug = debug;
  }
  ex.send(200, JSON.stringify(out));
}

const EVALUATE_FIELDS = new Set(['flagKey', 'serviceId', 'environment', 'defaultValue', 'context']);

/** The common valid body, checked without zod; anything unusual goes to zod for the exact 400. */
function quickEvaluateBody(raw: unknown): EvaluateBody | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  for (const key in raw) if (!EVALUATE_FIELDS.has(key)) return undefined;
  const { flagKey, serviceId, environment } = raw as Record<string, unknown>;
  if (typeof flagKey !== 'string' || flagKey.length < 1 || flagKey.length > 256) return undefined;
  if (serviceId !== undefined && (typeof serviceId !== 'string' || serviceId.length < 1 || serviceId.length > 128)) return undefined;
  if (environment !== undefined && !isEnvironment(environment)) return undefined;
  return raw as EvaluateBody;
}

/** REST batch on the lean edge: the client SDKs' and the demo grid's all-flags path. */
export function restBatchRoute(evaluation: EvaluationService): LeanRoute {
  return defineLeanRoute({
    method: 'post',
    path: '/api/flags/evaluate/batch',
    summary: 'Evaluate up to 100 flags (4,096 on a demo service) for one context; items may use `key` for `flagKey`',
    tags: ['evaluation'],
    ...EVALUATION_POLICY,
    bodyLimit: BATCH_BODY_LIMIT,
    query: DebugQuery,
    body: BatchBody,
    response: z.object({ results: z.array(EvaluationResultSchema), _debug: z.record(z.unknown()).optional() }),
    respond: (ex, raw) => evaluateWith(evaluation, ex, raw, quickBatchBody, BatchBody, answerBatch),
  });
}

function answerBatch(evaluation: EvaluationService, ex: Exchange, body: BatchBody, grant: ServiceGrant, t1: number, t2: number): void {
  const environment: Environment = targetEnvironment(ex.principal, body.environment) ?? DEFAULT_ENVIRONMENT;
  const max = grant.demo ? DEMO_BATCH_LIMIT : BATCH_LIMIT;
  if (body.flags.length > max) {
    const message = `at most ${max} flags per batch${grant.demo ? '' : ` (${DEMO_BATCH_LIMIT} on a demo service)`}`;
    throw validationFailed([{ path: 'body.flags', message }]);
  }
  const flags = new Array<FlagRequest>(body.flags.length);
  for (let i = 0; i < flags.length; i++) {
    const f = body.flags[i];
    flags[i] = { flagKey: (f.flagKey ?? f.key) as string, defaultValue: f.defaultValue };
  }
  evaluation.checkVisible(grant, environment, flags.map((f) => f.flagKey));
  const t3 = performance.now();
  ex.limit(evaluation.consumeServiceBudget(grant), PER_SERVICE.what);
  const t4 = performance.now();
  const results = evaluation.evaluateKeys(grant, environment, flags, contextOf(body.context), {
    source: 'rest',
    startedAt: ex.startedAt,
    bodyBytes: ex.bodyBytes,
  });
  const t5 = performance.now();
  // The answer as bytes, copied once from each result's JSON bytes: a demo batch of 4,096 as a
  // string was some 300 KB in V8's large-object space per request, and the old-generation
  // collections it brought on were the tail of its latency.
  const parts: Buffer[] = [RESULTS_OPEN];
  for (let i = 0; i < results.length; i++) {
    if (i > 0) parts.push(BETWEEN_ENTRIES);
    parts.push(restEntry(results[i]));
  }
  let close = RESULTS_CLOSE;
  if (ex.query !== '' && new URLSearchParams(ex.query).get('debug') === 'true') {
    const debug: DebugInfo = {
      timings: { rateLimit: round3(ex.rateLimitMs + (t4 - t3)), validation: round3(t2 - t1), cacheGet: round3(t3 - t2), evaluate: round3(t5 - t4) },
      cacheHit: grant.cacheHit,
      totalMs: round3(performance.now() - ex.startedAt),
    };
    close = Buffer.from(`],"_debug":${JSON.stringify(debug)}}`);
  }
  parts.push(close);
  ex.send(200, Buffer.concat(parts));
}

const RESULTS_OPEN = Buffer.from('{"results":[');
const BETWEEN_ENTRIES = Buffer.from(',');
const RESULTS_CLOSE = Buffer.from(']}');

/** One result of a batch answer as JSON bytes, built once per interned result (engine/evaluate.ts). */
const restEntry = perInternedResult((r) => Buffer.from(JSON.stringify(restResult(r))));

/**
 * The REST result shape (docs/evaluation.md#results): absent fields are left out, `value` is never
 * undefined.
 */
function restResult(r: EvaluationResult): Record<string, unknown> {
  const out: Record<string, unknown> = { flagKey: r.flagKey, value: r.value === undefined ? null : r.value, reason: r.reason };
  if (r.variant !== undefined) out.variant = r.variant;
  if (r.errorCode !== undefined) {
    out.errorCode = r.errorCode;
    out.errorMessage = r.errorMessage;
  }
  return out;
}

const round3 = (ms: number) => Math.round(ms * 1000) / 1000;
