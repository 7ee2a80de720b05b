import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fromJson, toJson, type JsonObject, type JsonValue } from '@bufbuild/protobuf';
import { ValueSchema, type Value } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createContextKey, createContextValues, type ContextValues, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { ANONYMOUS, type Principal } from '../../auth/principal';
import { HttpError, badRequest, personalTokenRefused, tooManyRequests, type ErrorCode } from '../../http/errors';
import type { Environment } from '../../domain/environments';
import type { AnyFlag, EvaluationService as EvaluationServiceDesc } from '../../gen/flags/v1/evaluation_pb';
import { targetEnvironment, targetService, type ServiceGrant } from './access';
import type { EvaluationContext, EvaluationResult, FlagType } from './engine/index';
import type { EvaluationSource } from './recorder';
import { BATCH_LIMIT } from './schemas';
import { DEFAULT_ENVIRONMENT, isEnvironment, type EvaluationService, type FlagRequest } from './service';
import type { StreamLimits } from './stream-limits';
import type { DisconnectReason } from '../../lib/metrics/metrics';
import { StallGuard, type StreamClientLimits, type StreamHub, type StreamMessage, type Subscriber } from './streams';

/**
 * flags.v1.EvaluationService (proto/flags/v1/evaluation.proto): the RPC implementation shared by
 * the Connect and gRPC-Web adapters (connect-routes.ts mounts them). Transport failures map to
 * Connect codes: no or bad credential UNAUTHENTICATED, personal token or missing permission
 * PERMISSION_DENIED (docs/errors.md#other-protocols), unknown or inaccessible service NOT_FOUND,
 * bad arguments INVALID_ARGUMENT, rate limits RESOURCE_EXHAUSTED. Evaluation errors
 * (FLAG_NOT_FOUND, TYPE_MISMATCH …) are part of the response, with reason ERROR, as on REST.
 */

const kPrincipal = createContextKey<Principal>(ANONYMOUS, { description: 'caller' });
const kSource = createContextKey<EvaluationSource>('connect', { description: 'protocol' });
/** The client address (per-IP bucket) and the response, for the open-stream caps and the stall rule. */
const kConnection = createContextKey<RpcConnection | undefined>(undefined, { description: 'connection' });

export interface RpcConnection {
  ip: string;
  res: ServerResponse;
}

/** What a call carries into the implementation: the caller, the protocol it came by and its connection. */
export function rpcCallValues(principal: Principal, source: EvaluationSource, connection: RpcConnection): ContextValues {
  return createContextValues().set(kPrincipal, principal).set(kSource, source).set(kConnection, connection);
}

/** Messages an EventStream may have waiting for its client (references to shared messages). */
const MAX_QUEUED = 10_000;

export interface RpcDeps {
  evaluation: EvaluationService;
  hub: StreamHub;
  /** Open-stream caps, shared with the SSE routes. */
  streamLimits: StreamLimits;
  /** stallTimeoutMs: how long an EventStream client may leave its socket backed up. */
  streamClient: StreamClientLimits;
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

/** An HttpError as the Connect error of its code; anything else unchanged. */
export function toConnectError(error: unknown): unknown {
  if (!(error instanceof HttpError)) return error;
  return new ConnectError(error.message, CONNECT_CODES[error.code] ?? Code.Internal);
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
export function evaluationServiceImpl(deps: RpcDeps): ServiceImpl<typeof EvaluationServiceDesc> {
  const { evaluation, hub, streamLimits, streamClient } = deps;

  async function target(ctx: HandlerContext, serviceId: string, environment: string): Promise<Target> {
    const startedAt = performance.now();
    const principal = ctx.values.get(kPrincipal);
    if (principal.type === 'personal_access_token') throw personalTokenRefused();
    // A bound project token reads its own service and environment (docs/api-reference.md#project-api-tokens).
    const service = targetService(principal, serviceId);
    if (service === undefined || service === '') throw badRequest('service_id is required');
    const env = targetEnvironment(principal, environment === '' ? undefined : environmentOf(environment)) ?? DEFAULT_ENVIRONMENT;
    const grant = await evaluation.grant(principal, service);
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
          rolloutSide: undefined,
          rolloutRuleId: undefined,
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
        t = await target(ctx, req.serviceId, req.environment);
      } catch (error) {
        throw toConnectError(error);
      }
      if (hub.isClosed) throw new ConnectError('server is shutting down', Code.Unavailable);
      const connection = ctx.values.get(kConnection);
      if (connection === undefined) throw new ConnectError('EventStream needs the node adapter', Code.Internal);
      const admission = streamLimits.acquire({ ip: connection.ip, principal: ctx.values.get(kPrincipal), serviceId: t.grant.service.id }, ctx.values.get(kSource) === 'grpc-web' ? 'grpc-web' : 'connect');
      if (!admission.ok) {
        ctx.responseHeader.set('Retry-After', String(admission.retryAfterSeconds));
        throw new ConnectError(admission.error.message, Code.ResourceExhausted);
      }
      const { res } = connection;
      // The adapter writes only after 'drain', so a client that stops reading leaves this
      // generator suspended: the guard, checked on every delivery and heartbeat, cuts it.
      let endedBy: DisconnectReason | undefined;
      const guard = new StallGuard(res, streamClient.stallTimeoutMs, undefined, () => {
        endedBy ??= 'slow_client';
      });
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
          if (queue.length >= MAX_QUEUED) {
            endedBy ??= 'slow_client';
            return void res.destroy();
          }
          queue.push(message);
          guard.check();
          wake?.();
        },
        heartbeat() {
          heartbeats++;
          guard.check();
          wake?.();
        },
        close(reason) {
          endedBy ??= reason;
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
        admission.release(endedBy ?? 'client');
      };
      // The slot is freed when the client goes, even while this generator waits on a write.
      const onAbort = () => {
        endedBy ??= 'client';
        subscriber.close('client');
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

export function anyFlag(r: EvaluationResult, type: FlagType | undefined): AnyFlag {
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
