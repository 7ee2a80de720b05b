import { createHash } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { z } from 'zod';
import type { Principal } from '../../auth/principal';
import { HttpError, badRequest, type ErrorCode } from '../../http/errors';
import { BODY_LIMITS, HANDLED, defineRoute, type AnyRoute, type RequestContext } from '../../http/route';
import { PER_SERVICE } from '../../http/rate-limit';
import type { Environment } from '../../domain/environments';
import { targetEnvironment, targetService, type ServiceGrant } from './access';
import { perInternedResult, type ErrorCode as EngineErrorCode, type EvaluationContext, type EvaluationResult, type Reason } from './engine/index';
import { EVALUATION_POLICY, defineLeanRoute, type Exchange, type LeanRoute } from './lean';
import { channelWindow, type ChannelClaims, type ChannelTokens } from './ofrep-channel';
import { OFREP_INACTIVITY_DELAY_SEC, eventStreamUrl, flagConfigOf, type FlagConfigWaiters } from './ofrep-events';
import { OfrepBody, contextOf, validateBody, validateQuery } from './schemas';
import { DEFAULT_ENVIRONMENT, isEnvironment, type EvaluationService } from './service';
import type { EnvironmentSnapshot, Visibility } from './snapshots';

/**
 * OpenFeature Remote Evaluation Protocol (OFREP) v1 under /api/ofrep/v1/. The service is named
 * by the `X-Service-Id` header and the environment by `X-Environment` (default development).
 * Single and bulk evaluation are served on the lean edge (lean.ts); configuration is an
 * Express route.
 *
 * Status codes follow the published OFREP OpenAPI document (open-feature/protocol 0.3.0):
 * 200 success, 400 {key, errorCode, errorDetails} for evaluation errors, 404 FLAG_NOT_FOUND,
 * 401/403/429 for access and rate limits, 304 for an unchanged bulk answer. Reasons and error
 * codes are the document's (OFREP_REASONS, OFREP_EVALUATION_ERRORS); the REST routes keep their
 * own (docs/evaluation.md#reasons). Error bodies also carry our `{error, message}`.
 *
 * Bulk answers name an event stream (ofrep-events.ts) for callers who read the service with a
 * project API token, and take the stream's flagConfigEtag / flagConfigLastModified back: a
 * replica that has not applied the announced change waits for it (at most FLAG_CONFIG_WAIT_MS)
 * and never answers 304 for it.
 */

export const OFREP_POLLING_INTERVAL_MS = 30_000;

/** How long a bulk re-fetch waits for this replica to apply the change its event announced. */
export const FLAG_CONFIG_WAIT_MS = 2_000;

const EVALUATE_PATH = '/api/ofrep/v1/evaluate/flags';

export interface OfrepDeps {
  evaluation: EvaluationService;
  channels: ChannelTokens;
  waiters: FlagConfigWaiters;
  /** Base URL of event-stream addresses (PUBLIC_DATA_URL); the request's own origin when absent. */
  publicDataUrl: string | undefined;
}

/** OFREP single and bulk evaluation on the lean edge. */
export function ofrepEvaluateRoutes(deps: OfrepDeps): LeanRoute[] {
  const { evaluation } = deps;
  return [
    defineLeanRoute({
      method: 'post',
      path: `${EVALUATE_PATH}/:key`,
      summary: `OFREP single-flag evaluation (headers: ${Object.entries(OfrepHeaders).map(([h, d]) => `${h}: ${d}`).join('; ')})`,
      tags: ['ofrep'],
      ...EVALUATION_POLICY,
      bodyLimit: BODY_LIMITS.evaluation,
      params: z.object({ key: z.string() }),
      body: OfrepBody,
      response: z.object({ key: z.string(), value: z.unknown(), reason: z.enum(['STATIC', 'TARGETING_MATCH', 'SPLIT', 'DISABLED']), variant: z.string().optional(), metadata: z.record(z.unknown()) }),
      respond: (ex, raw) => evaluateOne(evaluation, ex, raw),
      errorBody: (ex, error) => ofrepError(error, ex.param),
    }),
    defineLeanRoute({
      method: 'post',
      path: EVALUATE_PATH,
      summary:
        'OFREP bulk evaluation of every flag the caller may see (ETag / If-None-Match; headers X-Service-Id, X-Environment); eventStreams for project API tokens that read the service',
      tags: ['ofrep'],
      ...EVALUATION_POLICY,
      bodyLimit: BODY_LIMITS.evaluation,
      query: FlagConfigQuery,
      body: OfrepBody,
      response: z.object({
        flags: z.array(z.record(z.unknown())),
        eventStreams: z.array(z.object({ type: z.literal('sse'), url: z.string(), inactivityDelaySec: z.number().int() })).optional(),
      }),
      respond: (ex, raw) => evaluateAll(deps, ex, raw),
      errorBody: (_ex, error) => ofrepError(error, undefined),
    }),
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
  const target = ofrepTarget(ex.principal, ex.req.headers);
  if (target instanceof HttpError) throw target;
  const { context } = ofrepBody(raw);
  const grant = evaluation.grantNow(ex.principal, target.serviceId);
  if (grant === undefined) return evaluation.grant(ex.principal, target.serviceId).then((g) => answerOne(evaluation, ex, target, context, key, g));
  answerOne(evaluation, ex, target, context, key, grant);
  return undefined;
}

function answerOne(evaluation: EvaluationService, ex: Exchange, target: OfrepTarget, context: unknown, key: string, grant: ServiceGrant): void {
  evaluation.checkVisible(grant, target.environment, [key]);
  ex.limit(evaluation.consumeServiceBudget(grant), PER_SERVICE.what);
  const [result] = evaluation.evaluateKeys(grant, target.environment, [{ flagKey: key }], contextOf(context), {
    source: 'ofrep',
    startedAt: ex.startedAt,
    bodyBytes: ex.bodyBytes,
  });
  if (result.reason === 'ERROR') {
    const failure = ofrepFailure(result);
    return ex.send(failure.status, JSON.stringify(failure.body));
  }
  ex.send(200, flagJson(result, grant.service.environments[target.environment]));
}

/** POST /api/ofrep/v1/evaluate/flags: every flag the caller may see, 304 when its ETag still matches. */
function evaluateAll(deps: OfrepDeps, ex: Exchange, raw: unknown): Promise<void> | undefined {
  const target = ofrepTarget(ex.principal, ex.req.headers);
  if (target instanceof HttpError) throw target;
  const { context } = ofrepBody(raw);
  const announced = announcedConfig(ex.query);
  const grant = deps.evaluation.grantNow(ex.principal, target.serviceId);
  if (grant === undefined) return deps.evaluation.grant(ex.principal, target.serviceId).then((g) => answerAll(deps, ex, target, context, announced, g));
  return answerAll(deps, ex, target, context, announced, grant);
}

function answerAll(deps: OfrepDeps, ex: Exchange, target: OfrepTarget, rawContext: unknown, announced: AnnouncedConfig | undefined, grant: ServiceGrant): Promise<void> | undefined {
  ex.limit(deps.evaluation.consumeServiceBudget(grant), PER_SERVICE.what);
  const context = contextOf(rawContext);
  if (typeof context !== 'object' || context === null || Array.isArray(context)) {
    throw new HttpError(400, 'context must be an object', { details: [{ path: 'body.context', message: 'Expected object' }] }, undefined, 'invalid_context');
  }
  const snapshot = grant.service.environments[target.environment];
  if (announced === undefined || hasApplied(snapshot, grant.visibility, announced)) return bulkAnswer(deps, ex, target, context, grant, true);
  // Announced by another replica's stream and not applied here yet: wait briefly, never 304 without it.
  return deps.waiters
    .until(grant.service.id, target.environment, () => hasApplied(snapshot, grant.visibility, announced), FLAG_CONFIG_WAIT_MS)
    .then((applied) => bulkAnswer(deps, ex, target, context, grant, applied));
}

function bulkAnswer(deps: OfrepDeps, ex: Exchange, target: OfrepTarget, context: EvaluationContext, grant: ServiceGrant, mayBeUnchanged: boolean): Promise<void> | undefined {
  const snapshot = grant.service.environments[target.environment];
  const channel = channelOf(ex.principal, grant, target.environment);
  const window = channel === undefined ? undefined : channelWindow();
  // The answer depends on the visible flags and on the context; for stream callers also on the
  // channel window, so a 304 never leaves a client with an event-stream URL past its lifetime.
  const etag = snapshot.answerEtag(grant.visibility, JSON.stringify(context), window === undefined ? '' : String(window));
  const extra: Record<string, string> = { ETag: etag, 'Cache-Control': 'private, no-cache' };
  if (snapshot.lastModified > 0) extra['Last-Modified'] = snapshot.lastModifiedHttpDate();
  const ifNoneMatch = ex.req.headers['if-none-match'];
  if (mayBeUnchanged && etagMatches(typeof ifNoneMatch === 'string' ? ifNoneMatch : undefined, etag)) {
    ex.send(304, '', extra);
    return undefined;
  }
  const results = deps.evaluation.evaluateVisible(grant, target.environment, context, { source: 'ofrep', startedAt: ex.startedAt, bodyBytes: ex.bodyBytes });
  let flags = '';
  for (let i = 0; i < results.length; i++) flags += (i === 0 ? '' : ',') + flagJson(results[i], snapshot);
  const base = channel === undefined ? undefined : (deps.publicDataUrl ?? requestOrigin(ex));
  if (channel === undefined || window === undefined || base === undefined) {
    ex.send(200, `{"flags":[${flags}]}`, extra);
    return undefined;
  }
  const answer = (token: string) => ex.send(200, `{"flags":[${flags}],${eventStreamsMember(base, channel, token, flagConfigOf(snapshot).etag)}}`, extra);
  // Signed once per window and API token: the rest of the window's answers go out without a promise.
  const token = deps.channels.issuedNow(channel, window);
  if (token !== undefined) {
    answer(token);
    return undefined;
  }
  return deps.channels.issue(channel, window).then(answer);
}

/** The `eventStreams` member of recent answers, by channel token: it changes with the window or the flags. */
const streamMembers = new Map<string, { base: string; etag: string; json: string }>();
const STREAM_MEMBERS_KEPT = 10_000;

/** `"eventStreams":[...]` for a stream caller, built once per channel token, base and flags ETag. */
function eventStreamsMember(base: string, channel: ChannelClaims, token: string, etag: string): string {
  const known = streamMembers.get(token);
  if (known !== undefined && known.base === base && known.etag === etag) return known.json;
  const url = eventStreamUrl(base, { serviceId: channel.serviceId, environment: channel.environment, channel: token, etag });
  const json = `"eventStreams":${JSON.stringify([{ type: 'sse', url, inactivityDelaySec: OFREP_INACTIVITY_DELAY_SEC }])}`;
  if (streamMembers.size >= STREAM_MEMBERS_KEPT) streamMembers.clear();
  streamMembers.set(token, { base, etag, json });
  return json;
}

/**
 * Who gets an event stream: callers who read the service with a project API token (its own
 * project's read token, or any token on a demo service). Their channel token can be tied to an
 * API token that revocation ends; sessions and anonymous callers poll (or use /api/flags/stream).
 */
function channelOf(principal: Principal, grant: ServiceGrant, environment: Environment): ChannelClaims | undefined {
  if (principal.type !== 'project_api_token' || grant.visibility !== 'all') return undefined;
  return { tokenId: principal.tokenId, tokenType: principal.tokenType, projectId: principal.projectId, serviceId: grant.service.id, environment };
}

/** This listener's origin as the client reached it (PUBLIC_DATA_URL names it behind a proxy). */
function requestOrigin(ex: Exchange): string | undefined {
  const host = ex.req.headers.host;
  if (host === undefined || host === '') return undefined;
  return `${(ex.req.socket as TLSSocket).encrypted ? 'https' : 'http'}://${host}`;
}

/** What a refetchEvaluation announced, sent back on the re-fetch (ADR-0008). */
interface AnnouncedConfig {
  etag?: string;
  /** Unix seconds. */
  lastModified?: number;
}

const UNIX_SECONDS = /^\d{1,12}$/;
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;

export const FlagConfigQuery = z.object({
  flagConfigEtag: z.string().min(1).max(256).optional().describe("The `etag` of the event-stream message that triggered this re-fetch"),
  flagConfigLastModified: z
    .string()
    .regex(new RegExp(`${UNIX_SECONDS.source}|${ISO_DATE_TIME.source}`))
    .refine((s) => UNIX_SECONDS.test(s) || !Number.isNaN(Date.parse(s)), 'must be Unix seconds or an ISO 8601 date-time')
    .optional()
    .describe('The `lastModified` of that message: Unix seconds (what this service sends) or an ISO 8601 date-time'),
});

function announcedConfig(query: string): AnnouncedConfig | undefined {
  if (query === '') return undefined;
  const parsed = validateQuery(FlagConfigQuery, Object.fromEntries(new URLSearchParams(query)));
  if (parsed instanceof HttpError) throw parsed;
  const { flagConfigEtag: etag, flagConfigLastModified: lm } = parsed;
  if (etag === undefined && lm === undefined) return undefined;
  const lastModified = lm === undefined ? undefined : UNIX_SECONDS.test(lm) ? Number(lm) : Math.floor(Date.parse(lm) / 1000);
  return { etag, lastModified };
}

/**
 * Whether this replica has applied the announced configuration: the same ETag, or a newer
 * lastModified. Within the same second only the ETag can tell (two changes in one second), so
 * a differing ETag there counts as not applied.
 */
function hasApplied(snapshot: EnvironmentSnapshot, visibility: Visibility, announced: AnnouncedConfig): boolean {
  if (announced.etag !== undefined && announced.etag === snapshot.etag(visibility)) return true;
  if (announced.lastModified === undefined) return false;
  const mine = Math.floor(snapshot.lastModified / 1000);
  return announced.etag === undefined ? mine >= announced.lastModified : mine > announced.lastModified;
}

interface OfrepTarget {
  serviceId: string;
  environment: Environment;
}

/** The headers' service and environment; a bound project token's own where they name none (targetService). */
function ofrepTarget(principal: Principal, headers: Record<string, string | string[] | undefined>): OfrepTarget | HttpError {
  const serviceId = targetService(principal, single(headers['x-service-id']));
  if (!serviceId) return new HttpError(400, 'The X-Service-Id header is required');
  const env = single(headers['x-environment']);
  if (env !== undefined && !isEnvironment(env)) return new HttpError(400, 'X-Environment must be development, staging or production');
  return { serviceId, environment: targetEnvironment(principal, env as Environment | undefined) ?? DEFAULT_ENVIRONMENT };
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

/**
 * The reasons of the published OFREP schema (STATIC, TARGETING_MATCH, SPLIT, DISABLED, UNKNOWN)
 * for the engine's: the flag's default value is STATIC, a weighted variant SPLIT, a matched rule
 * TARGETING_MATCH, and a disabled flag DISABLED (docs/evaluation.md#reasons). UNKNOWN does not
 * occur.
 */
export const OFREP_REASONS: Record<Exclude<Reason, 'ERROR'>, string> = {
  DEFAULT: 'STATIC',
  VARIANT: 'SPLIT',
  TARGETING_MATCH: 'TARGETING_MATCH',
};

function ofrepReason(r: EvaluationResult): string {
  return r.disabled ? 'DISABLED' : OFREP_REASONS[r.reason as Exclude<Reason, 'ERROR'>];
}

/**
 * The schema's evaluation error codes for the engine's: FLAG_NOT_FOUND (404), and PARSE_ERROR,
 * TARGETING_KEY_MISSING, INVALID_CONTEXT or GENERAL (400 alone, or an entry of a bulk answer).
 * OFREP has no TYPE_MISMATCH (it sends no expected type; the provider checks types itself): a
 * stored value that does not match its flag's type is GENERAL, its errorDetails says why.
 */
export const OFREP_EVALUATION_ERRORS: Record<EngineErrorCode, string> = {
  FLAG_NOT_FOUND: 'FLAG_NOT_FOUND',
  PARSE_ERROR: 'PARSE_ERROR',
  TARGETING_KEY_MISSING: 'TARGETING_KEY_MISSING',
  INVALID_CONTEXT: 'INVALID_CONTEXT',
  TYPE_MISMATCH: 'GENERAL',
  GENERAL: 'GENERAL',
};

/**
 * One flag's answer as JSON (a single evaluation's body, an entry of a bulk answer), built once
 * per interned result (engine/evaluate.ts). An interned result belongs to one compiled flag,
 * compiled from one record, so the flag version it carries cannot change under it.
 */
const flagJson = perInternedResult((r, snapshot: EnvironmentSnapshot) => {
  if (r.reason === 'ERROR') return JSON.stringify(ofrepFailure(r).body);
  const version = snapshot.get(r.flagKey)?.record.version;
  return JSON.stringify(ofrepSuccess(r, version === undefined ? {} : { flagVersion: version }));
});

function ofrepSuccess(r: EvaluationResult, metadata: Record<string, string | number | boolean>): Record<string, unknown> {
  const out: Record<string, unknown> = { key: r.flagKey, value: r.value, reason: ofrepReason(r) };
  if (r.variant !== undefined) out.variant = r.variant;
  out.metadata = metadata;
  return out;
}

/** An evaluation ERROR as OFREP answers it: 404 for FLAG_NOT_FOUND, 400 for the rest. */
function ofrepFailure(r: EvaluationResult): { status: number; body: Record<string, unknown> } {
  const status = r.errorCode === 'FLAG_NOT_FOUND' ? 404 : 400;
  return { status, body: { key: r.flagKey, errorCode: OFREP_EVALUATION_ERRORS[r.errorCode ?? 'GENERAL'], errorDetails: r.errorMessage ?? '' } };
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
    cacheInvalidation: z.object({
      polling: z.object({ enabled: z.boolean(), minPollingIntervalMs: z.number() }),
      eventStreams: z
        .object({ enabled: z.boolean(), types: z.array(z.string()), inactivityDelaySec: z.number(), for: z.string() })
        .describe('ADR-0008 event streams named by bulk answers'),
    }),
    flagEvaluation: z.object({
      supportedTypes: z.array(z.string()),
      reasons: z.record(z.string()).describe('Each OFREP reason this service answers, and when (REST reasons in brackets)'),
      errorCodes: z.record(z.string()).describe('Each OFREP error code this service answers, and when'),
    }),
  }),
});

const CONFIGURATION = {
  name: 'flagship',
  capabilities: {
    cacheInvalidation: {
      polling: { enabled: true, minPollingIntervalMs: OFREP_POLLING_INTERVAL_MS },
      eventStreams: {
        enabled: true,
        types: ['sse'],
        inactivityDelaySec: OFREP_INACTIVITY_DELAY_SEC,
        for: 'bulk answers to a project API token that reads the service',
      },
    },
    flagEvaluation: {
      supportedTypes: ['boolean', 'string', 'int', 'float', 'object'],
      reasons: {
        STATIC: "the flag's default value (REST: DEFAULT)",
        SPLIT: 'a weighted variant chosen by the targeting key (REST: VARIANT)',
        TARGETING_MATCH: 'the value of the first targeting rule that matched (REST: TARGETING_MATCH)',
        DISABLED: "the flag is disabled and serves its default value (REST: DEFAULT)",
      },
      errorCodes: {
        FLAG_NOT_FOUND: 'no such flag, or one the caller may not see (404)',
        TARGETING_KEY_MISSING: 'variants need a targetingKey in the context (400)',
        INVALID_CONTEXT: 'the context is not an object (400)',
        PARSE_ERROR: 'the request body is not JSON (400)',
        GENERAL: "anything else: the evaluation's work budget ran out, or a stored value does not match its flag's type (REST: TYPE_MISMATCH)",
      },
    },
  },
};
const CONFIGURATION_ETAG = `"${createHash('sha256').update(JSON.stringify(CONFIGURATION)).digest('hex').slice(0, 16)}"`;

const OfrepHeaders = {
  'x-service-id': 'Service whose flags are evaluated',
  'x-environment': 'development (default), staging or production',
};

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
      summary: 'OFREP provider configuration: polling interval, event streams, supported types, the reasons and error codes answered',
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
