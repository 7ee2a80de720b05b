import { performance } from 'node:perf_hooks';
import type { JsonObject } from '@bufbuild/protobuf';
import { Code, ConnectError, createContextKey, createContextValues, type ContextValues, type HandlerContext } from '@connectrpc/connect';
import { ANONYMOUS } from '../../auth/principal';
import type { Logger } from '../../infra/logger';
import type { DisconnectReason, StreamKind } from '../../lib/metrics/metrics';
import { PER_IP, PER_SERVICE, PER_TOKEN, rateLimitMessage, type RateDecision } from '../../http/rate-limit';
import { toConnectError } from '../evaluation/connect-rpc';
import type { EvaluationContext, EvaluationResult, FlagType } from '../evaluation/engine/index';
import type { LocalRateLimiter } from '../evaluation/local-rate-limiter';
import { OFREP_REASONS } from '../evaluation/ofrep';
import type { EvaluationService } from '../evaluation/service';
import type { StreamLimits } from '../evaluation/stream-limits';
import { credentialOf, type FlagdCredentials, type FlagSet } from './credentials';
import type { FlagSetFeed } from './feed';
import { Mailbox, type FlagdStreams, type StreamRegistration } from './streams';
import { DEFAULT_VARIANT, DISABLED_VARIANT } from './translate';

/**
 * The flagd services (docs/local-evaluation.md): flagd.sync.v1.FlagSyncService and
 * flagd.evaluation v1/v2, over the evaluation data plane's snapshots, evaluation service, rate
 * limits and stream caps.
 */

/** Where a call came from: the client address (per-IP limits) and its HTTP/2 session, if any. */
export interface FlagdConnection {
  ip: string;
  /** One per client connection over HTTP/2: a provider's calls share it. */
  session: object | undefined;
}

const kConnection = createContextKey<FlagdConnection>({ ip: 'unknown', session: undefined }, { description: 'flagd connection' });
const connectionOf = (ctx: HandlerContext) => ctx.values.get(kConnection);

export function connectionValues(connection: FlagdConnection): ContextValues {
  return createContextValues().set(kConnection, connection);
}

export interface FlagdRpcDeps {
  credentials: FlagdCredentials;
  evaluation: EvaluationService;
  feed: FlagSetFeed;
  streams: FlagdStreams;
  limiter: LocalRateLimiter;
  streamLimits: StreamLimits;
  limits: { perIp: number; perToken: number };
  /** How often an EventStream sends keep_alive. */
  keepAliveMs: number;
  logger: Logger;
}

/** The reason of a successful result, as OFREP answers it (docs/evaluation.md#reasons). */
function reasonOf(r: EvaluationResult): string {
  return r.disabled ? 'DISABLED' : OFREP_REASONS[r.reason as keyof typeof OFREP_REASONS];
}

/** Our variant name, else the translation's: `rule:<ruleId>`, `disabled` or `default` (docs/local-evaluation.md#values-variants-and-reasons). */
function variantOf(r: EvaluationResult): string {
  if (r.variant !== undefined) return r.variant;
  if (r.ruleId !== undefined) return `rule:${r.ruleId}`;
  return r.disabled ? DISABLED_VARIANT : DEFAULT_VARIANT;
}

/** flagd's status codes for evaluation errors (what its providers map back to OpenFeature errors). */
const ERROR_STATUS: Record<string, Code> = {
  FLAG_NOT_FOUND: Code.NotFound,
  TYPE_MISMATCH: Code.InvalidArgument,
  PARSE_ERROR: Code.DataLoss,
  TARGETING_KEY_MISSING: Code.InvalidArgument,
  INVALID_CONTEXT: Code.InvalidArgument,
  GENERAL: Code.Unknown,
};

function evaluationError(r: EvaluationResult): ConnectError {
  const code = r.errorCode ?? 'GENERAL';
  return new ConnectError(`${code}: ${r.errorMessage ?? 'evaluation failed'}`, ERROR_STATUS[code] ?? Code.Unknown);
}

const isPlainObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

function typeMismatch(r: EvaluationResult, wanted: string): ConnectError {
  return new ConnectError(`TYPE_MISMATCH: flag "${r.flagKey}" is not ${wanted}`, Code.InvalidArgument);
}

/** What a Resolve<Type> call asks: the same fields on v1 and v2. */
export interface ResolveRequest {
  flagKey: string;
  context?: JsonObject;
}

/** A Resolve<Type> method: the flag type it evaluates for, and its answer for a result of that type. */
export interface ResolveMethod<W = unknown> {
  expectedType: FlagType;
  /** Whether a value is of the method's type (TYPE_MISMATCH otherwise). */
  accepts(value: unknown): boolean;
  /** What the type is called in a TYPE_MISMATCH message. */
  wanted: string;
  /** The response message's fields (identical on v1 and v2). */
  response(r: EvaluationResult): { value: W; reason: string; variant: string; metadata: JsonObject };
}

function resolveMethod<V, W>(expectedType: FlagType, wanted: string, accepts: (value: unknown) => value is V, wire: (value: V) => W): ResolveMethod<W> {
  return {
    expectedType,
    wanted,
    accepts,
    response: (r) => ({ value: wire(r.value as V), reason: reasonOf(r), variant: variantOf(r), metadata: {} }),
  };
}

/** The five Resolve methods, by their name on v1 and v2's services. */
export const RESOLVE_METHODS = {
  resolveBoolean: resolveMethod('boolean', 'a boolean', (v): v is boolean => typeof v === 'boolean', (v) => v),
  resolveString: resolveMethod('string', 'a string', (v): v is string => typeof v === 'string', (v) => v),
  resolveFloat: resolveMethod('number', 'a number', (v): v is number => typeof v === 'number', (v) => v),
  resolveInt: resolveMethod('number', 'an integer', (v): v is number => Number.isSafeInteger(v), (v) => BigInt(v)),
  resolveObject: resolveMethod('object', 'an object', isPlainObject, (v) => v),
} as const;

/** Streams waiting for their connection's credential (the RPC-mode EventStream of providers that send none). */
type UnboundStreams = Set<(flagSet: FlagSet) => void>;

export function flagdRpc(deps: FlagdRpcDeps) {
  const { credentials, evaluation, feed, streams, limiter, streamLimits, limits, logger } = deps;
  const waiting = new WeakMap<object, UnboundStreams>();

  function spend(decision: RateDecision, what: string): void {
    if (!decision.allowed) throw new ConnectError(rateLimitMessage(decision.limit, limiter.windowSeconds, what), Code.ResourceExhausted);
  }

  /**
   * Per-IP budget, then the credential, then its per-token and per-service budgets. Synchronous
   * when the credential verifies without waiting (credentials.ts), as on a provider's hot path.
   */
  function admit(connection: FlagdConnection, token: string | undefined): FlagSet | Promise<FlagSet> {
    spend(limiter.consume(PER_IP.bucket(connection.ip), limits.perIp), PER_IP.what);
    let verified: FlagSet | Promise<FlagSet>;
    try {
      verified = credentials.verify(token);
    } catch (error) {
      throw toConnectError(error);
    }
    if (verified instanceof Promise) {
      return verified.then(spendFor, (error: unknown) => {
        throw toConnectError(error);
      });
    }
    return spendFor(verified);
  }

  function spendFor(flagSet: FlagSet): FlagSet {
    spend(limiter.consume(PER_TOKEN.bucket(flagSet.principal)!, limits.perToken), PER_TOKEN.what);
    const service = evaluation.consumeServiceBudget(flagSet.grant);
    if (service !== undefined) spend(service, PER_SERVICE.what);
    return flagSet;
  }

  /** A verified call binds its connection's waiting EventStreams to its flag set. */
  function bindWaiting(connection: FlagdConnection, flagSet: FlagSet): void {
    const { session } = connection;
    const unbound = session === undefined ? undefined : waiting.get(session);
    if (unbound === undefined) return;
    waiting.delete(session!);
    for (const bind of unbound) bind(flagSet);
  }

  /**
   * A Resolve<Type> call, whatever carried it (connect-node, or the lean gRPC path in unary.ts):
   * its result, or the ConnectError it fails with. Synchronous when the call was admitted without
   * waiting.
   */
  function resolve(connection: FlagdConnection, token: string | undefined, req: ResolveRequest, method: ResolveMethod): EvaluationResult | Promise<EvaluationResult> {
    const startedAt = performance.now();
    if (req.flagKey === '') throw new ConnectError('flag_key is required', Code.InvalidArgument);
    const admitted = admit(connection, token);
    if (admitted instanceof Promise) return admitted.then((flagSet) => evaluateFor(connection, flagSet, req, method, startedAt));
    return evaluateFor(connection, admitted, req, method, startedAt);
  }

  function evaluateFor(connection: FlagdConnection, flagSet: FlagSet, req: ResolveRequest, method: ResolveMethod, startedAt: number): EvaluationResult {
    bindWaiting(connection, flagSet);
    const [result] = evaluation.evaluateKeys(
      flagSet.grant,
      flagSet.environment,
      [{ flagKey: req.flagKey }],
      (req.context ?? {}) as EvaluationContext,
      { source: 'flagd', startedAt, bodyBytes: 0 },
      method.expectedType,
    );
    if (result.reason === 'ERROR') throw evaluationError(result);
    if (!method.accepts(result.value)) throw typeMismatch(result, method.wanted);
    return result;
  }

  /** A Resolve<Type> method on connect-node. */
  function connectMethod<W>(method: ResolveMethod<W>) {
    return async (req: ResolveRequest, ctx: HandlerContext) => method.response(await resolve(connectionOf(ctx), credentialOf(ctx.requestHeader), req, method));
  }

  /**
   * Runs one stream: its slot under the open-stream caps, its mailbox and its registration for
   * revocation and shutdown. `start` subscribes it (adding what undoes that with `onEnd`) and is
   * run inside the stream's lifetime, so whatever it set up is undone however the stream ends.
   */
  async function* openStream<T>(
    kind: StreamKind,
    ctx: HandlerContext,
    flagSet: FlagSet | undefined,
    mailbox: Mailbox<T>,
    start: (registration: StreamRegistration, onEnd: (undo: () => void) => void) => void,
  ): AsyncGenerator<T> {
    if (streams.isClosed) throw new ConnectError('The server is shutting down', Code.Unavailable);
    const { ip } = connectionOf(ctx);
    // A stream waiting for its credential follows no service yet: only the per-IP cap holds it,
    // so waiting streams from some addresses cannot take the slots of everyone else's.
    const admission = streamLimits.acquire({ ip, principal: flagSet?.principal ?? ANONYMOUS, serviceId: flagSet?.serviceId ?? `unbound:${ip}` }, kind);
    if (!admission.ok) {
      ctx.responseHeader.set('Retry-After', String(admission.retryAfterSeconds));
      throw new ConnectError(admission.error.message, Code.ResourceExhausted);
    }
    const registration = streams.add(mailbox, flagSet?.token);
    let failure: unknown;
    const reason = (): DisconnectReason =>
      ctx.signal.aborted ? 'client' : streams.isClosed ? 'shutdown' : ConnectError.from(failure ?? 'ended').code === Code.Unauthenticated ? 'revoked' : 'server';
    const undo = [() => admission.release(reason()), registration.remove];
    const onAbort = () => mailbox.fail(new ConnectError('The client went away', Code.Canceled));
    ctx.signal.addEventListener('abort', onAbort);
    try {
      start(registration, (fn) => undo.push(fn));
      yield* mailbox.messages();
    } catch (error) {
      failure = error;
      throw error;
    } finally {
      ctx.signal.removeEventListener('abort', onAbort);
      for (const fn of undo.reverse()) fn();
    }
  }

  const sync = {
    async *syncFlags(req: { selector: string }, ctx: HandlerContext) {
      const flagSet = await admit(connectionOf(ctx), credentialOf(ctx.requestHeader, req.selector));
      const { serviceId, environment } = flagSet;
      const mailbox = new Mailbox<{ flagConfiguration: string }>(true);
      const send = () => {
        try {
          mailbox.put({ flagConfiguration: feed.document(serviceId, environment) });
        } catch (error) {
          // A document that cannot be built ends the stream; the provider reconnects and retries.
          logger.error({ err: error, serviceId, environment }, 'flagd sync document failed');
          mailbox.fail(new ConnectError('Internal server error', Code.Internal));
        }
      };
      yield* openStream('flagd_sync', ctx, flagSet, mailbox, (_registration, onEnd) => {
        onEnd(feed.subscribe(serviceId, environment, send));
        send();
      });
    },
    async fetchAllFlags(req: { selector: string }, ctx: HandlerContext) {
      const flagSet = await admit(connectionOf(ctx), credentialOf(ctx.requestHeader, req.selector));
      return { flagConfiguration: feed.document(flagSet.serviceId, flagSet.environment) };
    },
    async getMetadata(_req: unknown, ctx: HandlerContext) {
      // Providers ask without a selector; one that sends a credential must send a valid one.
      const token = credentialOf(ctx.requestHeader);
      if (token !== undefined) await admit(connectionOf(ctx), token);
      return { metadata: {} };
    },
  };

  const evaluationImpl = {
    resolveBoolean: connectMethod(RESOLVE_METHODS.resolveBoolean),
    resolveString: connectMethod(RESOLVE_METHODS.resolveString),
    resolveFloat: connectMethod(RESOLVE_METHODS.resolveFloat),
    resolveInt: connectMethod(RESOLVE_METHODS.resolveInt),
    resolveObject: connectMethod(RESOLVE_METHODS.resolveObject),
    /** Every flag of the set; flags whose evaluation fails are left out, as flagd does. */
    async resolveAll(req: { context?: JsonObject }, ctx: HandlerContext) {
      const startedAt = performance.now();
      const connection = connectionOf(ctx);
      const flagSet = await admit(connection, credentialOf(ctx.requestHeader));
      bindWaiting(connection, flagSet);
      const results = evaluation.evaluateVisible(flagSet.grant, flagSet.environment, (req.context ?? {}) as EvaluationContext, { source: 'flagd', startedAt, bodyBytes: 0 });
      const flags: Record<string, { reason: string; variant: string; metadata: JsonObject; value: AnyValue }> = {};
      for (const r of results) {
        const value = anyValue(r.value);
        if (r.reason !== 'ERROR' && value !== undefined) flags[r.flagKey] = { reason: reasonOf(r), variant: variantOf(r), metadata: {}, value };
      }
      return { flags, metadata: {} };
    },
    /**
     * provider_ready, then configuration_change naming the changed flags, and keep_alive. A call
     * without a credential (the JS provider sends none on this stream) waits, hearing only
     * keep_alive, until a verified call on the same HTTP/2 connection names its flag set.
     */
    async *eventStream(_req: unknown, ctx: HandlerContext) {
      const token = credentialOf(ctx.requestHeader);
      const flagSet = token === undefined ? undefined : await admit(connectionOf(ctx), token);
      const { ip, session } = connectionOf(ctx);
      if (flagSet === undefined) spend(limiter.consume(PER_IP.bucket(ip), limits.perIp), PER_IP.what);
      const mailbox = new Mailbox<{ type: string; data: JsonObject }>(false);
      yield* openStream('flagd', ctx, flagSet, mailbox, (registration, onEnd) => {
        const follow = (set: FlagSet) => {
          registration.setToken(set.token);
          onEnd(
            feed.subscribe(set.serviceId, set.environment, (keys) => {
              mailbox.put({ type: 'configuration_change', data: { flags: Object.fromEntries(keys.map((key) => [key, {}])) } });
            }),
          );
        };
        if (flagSet !== undefined) follow(flagSet);
        else if (session !== undefined) onEnd(waitFor(session, follow));
        const keepAlive = setInterval(() => mailbox.put({ type: 'keep_alive', data: {} }), deps.keepAliveMs);
        onEnd(() => clearInterval(keepAlive));
        mailbox.put({ type: 'provider_ready', data: {} });
      });
    },
  };

  /** Registers a stream waiting for its connection's credential; returns how to stop waiting. */
  function waitFor(session: object, bind: (flagSet: FlagSet) => void): () => void {
    let set = waiting.get(session);
    if (set === undefined) {
      set = new Set();
      waiting.set(session, set);
    }
    const entry = set;
    entry.add(bind);
    return () => entry.delete(bind);
  }

  return { sync, evaluation: evaluationImpl, resolve };
}

type AnyValue =
  | { case: 'boolValue'; value: boolean }
  | { case: 'stringValue'; value: string }
  | { case: 'doubleValue'; value: number }
  | { case: 'objectValue'; value: JsonObject };

/** A value as ResolveAll's oneof; undefined for what it cannot carry (arrays, null). */
function anyValue(v: unknown): AnyValue | undefined {
  if (typeof v === 'boolean') return { case: 'boolValue', value: v };
  if (typeof v === 'string') return { case: 'stringValue', value: v };
  if (typeof v === 'number') return { case: 'doubleValue', value: v };
  if (isPlainObject(v)) return { case: 'objectValue', value: v };
  return undefined;
}
