import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fromJson, toJson, type JsonObject, type JsonValue } from '@bufbuild/protobuf';
import { ValueSchema, type Value } from '@bufbuild/protobuf/wkt';
import {
  Code,
  ConnectError,
  createConnectRouter,
  createContextKey,
  createContextValues,
  type ConnectRouterOptions,
  type HandlerContext,
  type Interceptor,
  type ServiceImpl,
} from '@connectrpc/connect';
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from '@connectrpc/connect-node';
import type { Request, Response } from 'express';
import type { Logger } from '../../infra/logger';
import { z } from 'zod';
import type { Principal } from '../../auth/principal';
import { HttpError, badRequest, personalTokenRefused, tooManyRequests, type ErrorCode } from '../../http/errors';
import { ipBucket } from '../../http/client-ip';
import { enforceDecision } from '../../http/rate-limit';
import { BODY_LIMITS, HANDLED, defineRoute, type AnyRoute, type RequestContext } from '../../http/route';
import { ANONYMOUS } from '../../auth/principal';
import type { Environment } from '../flags/types';
import { EvaluationService as EvaluationServiceDesc, type AnyFlag } from '../../gen/flags/v1/evaluation_pb';
import type { ServiceGrant } from './access';
import type { EvaluationContext, EvaluationResult, FlagType } from './engine/index';
import { BATCH_LIMIT, ContextSchema, contextOf } from './schemas';
import { DEFAULT_ENVIRONMENT, isEnvironment, type EvaluationService, type FlagRequest } from './service';
import type { StreamLimits } from './stream-limits';
import { StallGuard, type StreamClientLimits, type StreamHub, type StreamMessage, type Subscriber } from './streams';
import type { EvaluationSource } from './recorder';

/**
 * flags.v1.EvaluationService over Connect (JSON and binary, /api/connect/*) and gRPC-Web
 * (/api/grpc-web/*), mounted as Express routes so the per-IP limit, authentication and
 * request logging are shared with REST. Transport failures map to Connect codes: no or bad
 * credential UNAUTHENTICATED, personal token or missing permission PERMISSION_DENIED (spec 7),
 * unknown or inaccessible service NOT_FOUND, bad arguments INVALID_ARGUMENT, rate limits
 * RESOURCE_EXHAUSTED. Evaluation errors (FLAG_NOT_FOUND, TYPE_MISMATCH …) are part of the
 * response, with reason ERROR, as on REST.
 */

const kPrincipal = createContextKey<Principal>(ANONYMOUS, { description: 'caller' });
const kSource = createContextKey<EvaluationSource>('connect', { description: 'protocol' });
/** The client address (per-IP bucket) and the response, for the open-stream caps and the stall rule. */
const kConnection = createContextKey<{ ip: string; res: ServerResponse } | undefined>(undefined, { description: 'connection' });

/** Messages an EventStream may have waiting for its client (references to shared messages). */
const MAX_QUEUED = 10_000;

export const CONNECT_PREFIX = '/api/connect';
export const GRPC_WEB_PREFIX = '/api/grpc-web';

export interface ConnectDeps {
  evaluation: EvaluationService;
  hub: StreamHub;
  /** Open-stream caps, shared with the SSE routes. */
  streamLimits: StreamLimits;
  /** stallTimeoutMs: how long an EventStream client may leave its socket backed up. */
  streamClient: StreamClientLimits;
  logger: Logger;
}

/** Connect codes of our error codes; anything else is INTERNAL. */
const CONNECT_CODES: Partial<Record<ErrorCode, Code>> = {
  bad_request: Code.InvalidArgument,
  validation_failed: Code.InvalidArgument,
  malformed_json: Code.InvalidArgument,
  invalid_context: Code.InvalidArgument,
  unauthenticated: Code.Unauthenticated,
  forbidden: Code.PermissionDenied,
  personal_token_refused: Code.PermissionDenied,
  not_found: Code.NotFound,
  payload_too_large: Code.ResourceExhausted,
  rate_limited: Code.ResourceExhausted,
};

function toConnectError(error: unknown): unknown {
  if (!(error instanceof HttpError)) return error;
  return new ConnectError(error.message, CONNECT_CODES[error.code] ?? Code.Internal);
}

/**
 * Failures that are not ours to explain (a database or cache error, a bug) are logged here and
 * answered INTERNAL with the REST envelope's generic message: Connect would otherwise pass
 * nothing to the logs, and no backend text may reach the caller. Streams are covered too.
 */
function hideInternalErrors(logger: Logger): Interceptor {
  const hide = (error: unknown, rpc: string): ConnectError => {
    if (error instanceof ConnectError) return error;
    logger.error({ err: error, rpc }, 'rpc failed');
    return new ConnectError('Internal server error', Code.Internal);
  };
  async function* guarded<T>(messages: AsyncIterable<T>, rpc: string): AsyncIterable<T> {
    try {
      yield* messages;
    } catch (error) {
      throw hide(error, rpc);
    }
  }
  return (next) => async (req) => {
    try {
      const res = await next(req);
      return res.stream ? { ...res, message: guarded(res.message, req.method.name) } : res;
    } catch (error) {
      throw hide(error, req.method.name);
    }
  };
}

interface Target {
  grant: ServiceGrant;
  environment: Environment;
  source: EvaluationSource;
  startedAt: number;
}

function environmentOf(value: string): Environment {
  if (value === '') return DEFAULT_ENVIRONMENT;
  if (!isEnvironment(value)) throw badRequest('environment must be development, staging or production');
  return value;
}

function valueToJson(v: Value | undefined): unknown {
  return v === undefined ? undefined : toJson(ValueSchema, v);
}

function jsonToValue(v: unknown): Value {
  return fromJson(ValueSchema, (v === undefined ? null : v) as JsonValue);
}

/** The service implementation, shared by the Connect and gRPC-Web adapters. */
export function evaluationServiceImpl(deps: ConnectDeps): ServiceImpl<typeof EvaluationServiceDesc> {
  const { evaluation, hub, streamLimits, streamClient } = deps;

  async function target(ctx: HandlerContext, serviceId: string, environment: string): Promise<Target> {
    const startedAt = performance.now();
    const principal = ctx.values.get(kPrincipal);
    if (principal.type === 'personal_access_token') throw personalTokenRefused();
    if (serviceId === '') throw badRequest('service_id is required');
    const env = environmentOf(environment);
    const grant = await evaluation.grant(principal, serviceId);
    return { grant, environment: env, source: ctx.values.get(kSource), startedAt };
  }

  function spend(t: Target) {
    const decision = evaluation.consumeServiceBudget(t.grant);
    if (decision !== undefined && !decision.allowed) throw tooManyRequests('Rate limit exceeded for this service');
  }

  async function resolveTyped(
    ctx: HandlerContext,
    req: { flagKey: string; serviceId: string; environment: string; context?: JsonObject; defaultValue?: unknown },
    expectedType: FlagType,
    integer = false,
  ): Promise<EvaluationResult> {
    try {
      if (req.flagKey === '') throw badRequest('flag_key is required');
      const t = await target(ctx, req.serviceId, req.environment);
      evaluation.checkVisible(t.grant, t.environment, [req.flagKey]);
      spend(t);
      const [result] = evaluation.evaluateKeys(
        t.grant,
        t.environment,
        [{ flagKey: req.flagKey, defaultValue: req.defaultValue }],
        (req.context ?? {}) as EvaluationContext,
        { source: t.source, startedAt: t.startedAt, bodyBytes: 0 },
        expectedType,
      );
      if (integer && result.reason !== 'ERROR' && !Number.isSafeInteger(result.value)) {
        return {
          flagKey: req.flagKey,
          value: req.defaultValue,
          reason: 'ERROR',
          variant: undefined,
          errorCode: 'TYPE_MISMATCH',
          errorMessage: `value ${String(result.value)} is not an integer`,
          disabled: undefined,
          ruleId: undefined,
        };
      }
      return result;
    } catch (error) {
      throw toConnectError(error);
    }
  }

  const common = (r: EvaluationResult) => ({
    reason: r.reason,
    variant: r.variant ?? '',
    metadata: {},
    errorCode: r.errorCode ?? '',
    errorMessage: r.errorMessage ?? '',
  });

  return {
    async resolveBoolean(req, ctx) {
      const r = await resolveTyped(ctx, req, 'boolean');
      return { value: typeof r.value === 'boolean' ? r.value : false, ...common(r) };
    },
    async resolveString(req, ctx) {
      const r = await resolveTyped(ctx, req, 'string');
      return { value: typeof r.value === 'string' ? r.value : '', ...common(r) };
    },
    async resolveFloat(req, ctx) {
      const r = await resolveTyped(ctx, req, 'number');
      return { value: typeof r.value === 'number' ? r.value : 0, ...common(r) };
    },
    async resolveInt(req, ctx) {
      const r = await resolveTyped(ctx, { ...req, defaultValue: req.defaultValue === undefined ? undefined : Number(req.defaultValue) }, 'number', true);
      return { value: typeof r.value === 'number' && Number.isSafeInteger(r.value) ? BigInt(r.value) : 0n, ...common(r) };
    },
    async resolveObject(req, ctx) {
      const r = await resolveTyped(ctx, { ...req, defaultValue: valueToJson(req.defaultValue) }, 'object');
      return { value: r.value === undefined ? undefined : jsonToValue(r.value), ...common(r) };
    },
    async resolveAll(req, ctx) {
      try {
        // Each key is evaluated once, and at most BATCH_LIMIT of them, as on the REST batch.
        const flagKeys = [...new Set(req.flagKeys)];
        if (flagKeys.length > BATCH_LIMIT) throw badRequest(`flag_keys: at most ${BATCH_LIMIT} distinct keys per request; got ${flagKeys.length}`);
        const t = await target(ctx, req.serviceId, req.environment);
        const context = (req.context ?? {}) as EvaluationContext;
        const call = { source: t.source, startedAt: t.startedAt, bodyBytes: 0 };
        spend(t);
        let results: EvaluationResult[];
        if (flagKeys.length > 0) {
          evaluation.checkVisible(t.grant, t.environment, flagKeys);
          results = evaluation.evaluateKeys(t.grant, t.environment, flagKeys.map((flagKey): FlagRequest => ({ flagKey })), context, call);
        } else {
          results = evaluation.evaluateVisible(t.grant, t.environment, context, call);
        }
        const env = t.grant.service.environments[t.environment];
        const flags: Record<string, AnyFlag> = {};
        for (const r of results) flags[r.flagKey] = anyFlag(r, env.get(r.flagKey)?.record.type);
        return { flags };
      } catch (error) {
        throw toConnectError(error);
      }
    },
    async *eventStream(req, ctx) {
      let t: Target;
      try {
        t = await target(ctx, req.serviceId, req.environment === '' ? DEFAULT_ENVIRONMENT : req.environment);
      } catch (error) {
        throw toConnectError(error);
      }
      if (hub.isClosed) throw new ConnectError('server is shutting down', Code.Unavailable);
      const connection = ctx.values.get(kConnection);
      if (connection === undefined) throw new ConnectError('EventStream needs the node adapter', Code.Internal);
      const admission = streamLimits.acquire({ ip: connection.ip, principal: ctx.values.get(kPrincipal), serviceId: t.grant.service.id });
      if (!admission.ok) {
        ctx.responseHeader.set('Retry-After', String(admission.retryAfterSeconds));
        throw new ConnectError(admission.error.message, Code.ResourceExhausted);
      }
      const { res } = connection;
      // The adapter writes only after 'drain', so a client that stops reading leaves this
      // generator suspended: the guard, checked on every delivery and heartbeat, cuts it.
      const guard = new StallGuard(res, streamClient.stallTimeoutMs);
      const environment = req.environment === '' ? undefined : t.environment;
      const queue: StreamMessage[] = [];
      let wake: (() => void) | undefined;
      let done = false;
      let heartbeats = 0;
      const subscriber: Subscriber = {
        serviceId: t.grant.service.id,
        environment,
        visibility: t.grant.visibility,
        deliver(message) {
          if (queue.length >= MAX_QUEUED) return void res.destroy();
          queue.push(message);
          guard.check();
          wake?.();
        },
        heartbeat() {
          heartbeats++;
          guard.check();
          wake?.();
        },
        close() {
          // A client that cannot take its remaining output is cut rather than waited for.
          if (res.writableNeedDrain) res.destroy();
          done = true;
          wake?.();
        },
      };
      const remove = hub.add(subscriber);
      const end = () => {
        guard.stop();
        remove();
        admission.release();
      };
      // The slot is freed when the client goes, even while this generator waits on a write.
      const onAbort = () => {
        subscriber.close();
        end();
      };
      ctx.signal.addEventListener('abort', onAbort);
      try {
        const cursor = hub.cursor(t.grant.service.id);
        yield { type: 'connected', id: cursor, serviceId: t.grant.service.id, environment: environment ?? '', timestamp: new Date().toISOString() };
        // The replay goes out one message per write, as the client takes them; live changes wait behind it.
        if (req.lastEventId !== '') {
          for (const message of hub.replay(t.grant.service, environment, t.grant.visibility, req.lastEventId)) {
            if (done) return;
            yield streamResponse(message);
          }
        }
        for (;;) {
          while (queue.length > 0) yield streamResponse(queue.shift()!);
          if (heartbeats > 0) {
            heartbeats = 0;
            yield { type: 'heartbeat', timestamp: new Date().toISOString() };
            continue;
          }
          if (done) return;
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
        }
      } finally {
        ctx.signal.removeEventListener('abort', onAbort);
        end();
      }
    },
  };
}

function streamResponse(m: StreamMessage) {
  return {
    type: m.type,
    id: m.id,
    flagKey: m.flagKey ?? '',
    environment: m.environment ?? '',
    serviceId: m.serviceId,
    event: m.event ?? '',
    flag: m.flag as unknown as JsonObject | undefined,
    timestamp: m.timestamp,
  };
}

function anyFlag(r: EvaluationResult, type: FlagType | undefined): AnyFlag {
  const base = {
    $typeName: 'flags.v1.AnyFlag' as const,
    reason: r.reason,
    variant: r.variant ?? '',
    metadata: {},
    errorCode: r.errorCode ?? '',
    errorMessage: r.errorMessage ?? '',
    type: type ?? '',
  };
  const v = r.value;
  if (r.reason === 'ERROR' && v === undefined) return { ...base, value: { case: undefined } };
  if (typeof v === 'boolean') return { ...base, value: { case: 'boolValue', value: v } };
  if (typeof v === 'string') return { ...base, value: { case: 'stringValue', value: v } };
  if (typeof v === 'number') return { ...base, value: { case: 'doubleValue', value: v } };
  return { ...base, value: { case: 'objectValue', value: jsonToValue(v) } };
}

type Adapter = (req: Request, res: Response) => void;

/**
 * A node handler for one protocol family under a path prefix (what connectNodeAdapter does),
 * reporting failures through our logger; a client that went away mid-stream is not a failure.
 */
function createAdapter(impl: ServiceImpl<typeof EvaluationServiceDesc>, prefix: string, options: ConnectRouterOptions, source: EvaluationSource, logger: Logger): Adapter {
  const router = createConnectRouter({ readMaxBytes: BODY_LIMITS.evaluation, ...options, interceptors: [hideInternalErrors(logger)] });
  router.service(EvaluationServiceDesc, impl);
  const handlers = new Map(router.handlers.map((h) => [prefix + h.requestPath, h]));
  return (req, res) => {
    const handler = handlers.get(req.path);
    if (handler === undefined) {
      res.status(404).json({ error: 'Not Found', message: `No RPC ${req.path}` });
      return;
    }
    const principal = (req as IncomingMessage & { principal?: Principal }).principal ?? ANONYMOUS;
    const values = createContextValues()
      .set(kPrincipal, principal)
      .set(kSource, source)
      .set(kConnection, { ip: ipBucket(req.clientIp), res });
    handler(universalRequestFromNodeRequest(req, res, undefined, values))
      .then((response) => universalResponseToNodeResponse(response, res))
      .catch((reason) => {
        if (res.destroyed || ConnectError.from(reason).code === Code.Aborted) return;
        logger.error({ err: reason, rpc: handler.method.name }, 'rpc failed');
      });
  };
}

/** The Connect and gRPC-Web adapters, as Express routes (one per prefix). */
export function connectRoutes(deps: ConnectDeps): AnyRoute[] {
  const impl = evaluationServiceImpl(deps);
  const connect = createAdapter(impl, CONNECT_PREFIX, { connect: true, grpc: false, grpcWeb: false }, 'connect', deps.logger);
  const grpcWeb = createAdapter(impl, GRPC_WEB_PREFIX, { connect: false, grpc: false, grpcWeb: true }, 'grpc-web', deps.logger);
  const mount = (prefix: string, adapter: Adapter, what: string): AnyRoute =>
    defineRoute({
      method: 'post',
      path: `${prefix}/${EvaluationServiceDesc.typeName}/:method`,
      summary: `flags.v1.EvaluationService over ${what} (see proto/flags/v1/evaluation.proto)`,
      tags: ['connect'],
      auth: 'public',
      // Read-only RPCs; personal tokens are refused inside with PERMISSION_DENIED (spec 7).
      readOnly: true,
      csrfExempt: true,
      params: z.object({ method: z.string() }),
      handler: (ctx: RequestContext<unknown, unknown, unknown>) => {
        adapter(ctx.req, ctx.res);
        return HANDLED;
      },
    });
  return [mount(CONNECT_PREFIX, connect, 'Connect (JSON and binary)'), mount(GRPC_WEB_PREFIX, grpcWeb, 'gRPC-Web')];
}

const ConnectEvaluateBody = z
  .object({
    flagKey: z.string().min(1).max(256),
    serviceId: z.string().min(1).max(128),
    environment: z.enum(['development', 'staging', 'production']).optional(),
    context: ContextSchema.optional(),
    defaultValue: z.unknown().optional(),
  })
  .strict();

const ConnectBulkBody = z
  .object({
    serviceId: z.string().min(1).max(128),
    environment: z.enum(['development', 'staging', 'production']).optional(),
    context: ContextSchema.optional(),
    flagKeys: z.array(z.string().min(1).max(256)).max(100).optional().describe('Only these flags; absent means every flag the caller may see'),
  })
  .strict();

const ProtoResult = z
  .object({
    flagKey: z.string(),
    value: z.unknown(),
    reason: z.string(),
    variant: z.string().optional(),
    metadata: z.record(z.unknown()),
    errorCode: z.string().optional(),
    errorMessage: z.string().optional(),
  })
  .passthrough();

/**
 * The spec's JSON routes next to the RPCs: POST /api/connect/evaluate answers the protobuf JSON
 * of a Resolve*Response plus `flagKey`; POST /api/connect/bulk-evaluate the protobuf JSON of a
 * ResolveAllResponse (`flags` map of AnyFlag with boolValue / stringValue / doubleValue /
 * objectValue). Fields with default values are omitted, as protobuf JSON does.
 */
export function connectJsonRoutes(deps: { evaluation: EvaluationService }): AnyRoute[] {
  const { evaluation } = deps;
  const checkVersion = (ctx: RequestContext<unknown, unknown, unknown>) => {
    const version = ctx.req.get('connect-protocol-version');
    if (version !== undefined && version !== '1') throw badRequest('Connect-Protocol-Version must be 1');
  };
  return [
    defineRoute({
      method: 'post',
      path: '/api/connect/evaluate',
      summary: 'Evaluate one flag (protobuf-shaped JSON; optional Connect-Protocol-Version: 1)',
      tags: ['connect'],
      auth: 'public',
      sdk: true,
      csrfExempt: true,
      bodyLimit: BODY_LIMITS.evaluation,
      body: ConnectEvaluateBody,
      response: ProtoResult,
      async handler(ctx) {
        checkVersion(ctx);
        const startedAt = performance.now();
        const body = ctx.body;
        const environment = body.environment ?? DEFAULT_ENVIRONMENT;
        const grant = await evaluation.grant(ctx.principal, body.serviceId);
        evaluation.checkVisible(grant, environment, [body.flagKey]);
        spendOrThrow(evaluation, ctx, grant);
        const [r] = evaluation.evaluateKeys(grant, environment, [{ flagKey: body.flagKey, defaultValue: body.defaultValue }], contextOf(body.context), {
          source: 'connect',
          startedAt,
          bodyBytes: Number(ctx.req.headers['content-length'] ?? 0),
        });
        const out: Record<string, unknown> = { flagKey: r.flagKey, value: r.value === undefined ? null : r.value, reason: r.reason, metadata: {} };
        if (r.variant !== undefined) out.variant = r.variant;
        if (r.errorCode !== undefined) {
          out.errorCode = r.errorCode;
          out.errorMessage = r.errorMessage;
        }
        return out;
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/connect/bulk-evaluate',
      summary: 'Evaluate several flags (protobuf JSON of flags.v1.ResolveAllResponse)',
      tags: ['connect'],
      auth: 'public',
      sdk: true,
      csrfExempt: true,
      bodyLimit: BODY_LIMITS.evaluation,
      body: ConnectBulkBody,
      response: z.object({ flags: z.record(z.record(z.unknown())) }),
      async handler(ctx) {
        checkVersion(ctx);
        const startedAt = performance.now();
        const body = ctx.body;
        const environment = body.environment ?? DEFAULT_ENVIRONMENT;
        const grant = await evaluation.grant(ctx.principal, body.serviceId);
        const call = { source: 'connect' as const, startedAt, bodyBytes: Number(ctx.req.headers['content-length'] ?? 0) };
        let results: EvaluationResult[];
        if (body.flagKeys && body.flagKeys.length > 0) {
          evaluation.checkVisible(grant, environment, body.flagKeys);
          spendOrThrow(evaluation, ctx, grant);
          results = evaluation.evaluateKeys(grant, environment, body.flagKeys.map((flagKey) => ({ flagKey })), contextOf(body.context), call);
        } else {
          spendOrThrow(evaluation, ctx, grant);
          results = evaluation.evaluateVisible(grant, environment, contextOf(body.context), call);
        }
        const env = grant.service.environments[environment];
        const flags: Record<string, unknown> = {};
        for (const r of results) {
          const { $typeName: _name, ...message } = anyFlag(r, env.get(r.flagKey)?.record.type);
          flags[r.flagKey] = anyFlagJson(message);
        }
        return { flags };
      },
    }),
  ];
}

/** protobuf JSON of an AnyFlag (camelCase, default-valued fields omitted, the oneof flattened). */
function anyFlagJson(m: Omit<AnyFlag, '$typeName' | '$unknown'>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (m.reason) out.reason = m.reason;
  if (m.variant) out.variant = m.variant;
  if (m.value.case === 'objectValue') out.objectValue = toJson(ValueSchema, m.value.value);
  else if (m.value.case !== undefined) out[m.value.case] = m.value.value;
  out.metadata = m.metadata ?? {};
  if (m.errorCode) out.errorCode = m.errorCode;
  if (m.errorMessage) out.errorMessage = m.errorMessage;
  if (m.type) out.type = m.type;
  return out;
}

/** The per-service budget on an Express route (only callers who read the service spend it). */
export function spendOrThrow(evaluation: EvaluationService, ctx: RequestContext<unknown, unknown, unknown>, grant: ServiceGrant) {
  const decision = evaluation.consumeServiceBudget(grant);
  if (decision !== undefined) enforceDecision(ctx.res, decision, 'Rate limit exceeded for this service');
}

