import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import { toJson } from '@bufbuild/protobuf';
import { ValueSchema } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createConnectRouter, type ConnectRouterOptions, type Interceptor, type ServiceImpl } from '@connectrpc/connect';
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from '@connectrpc/connect-node';
import type { Request, Response } from 'express';
import { z } from 'zod';
import { ANONYMOUS, type Principal } from '../../auth/principal';
import { EnvironmentSchema } from '../../domain/environments';
import { badRequest, validationFailed } from '../../http/errors';
import { ipBucket } from '../../http/client-ip';
import { BODY_LIMITS, HANDLED, defineRoute, type AnyRoute, type RequestContext } from '../../http/route';
import type { Logger } from '../../infra/logger';
import { EvaluationService as EvaluationServiceDesc, type AnyFlag } from '../../gen/flags/v1/evaluation_pb';
import { targetEnvironment, targetService } from './access';
import { anyFlag, evaluationServiceImpl, rpcCallValues, type RpcDeps } from './connect-rpc';
import type { EvaluationResult } from './engine/index';
import type { EvaluationSource } from './recorder';
import { ContextSchema, contextOf } from './schemas';
import { DEFAULT_ENVIRONMENT, spendOrThrow, type EvaluationService } from './service';

/**
 * The Connect (JSON and binary, /api/connect/*) and gRPC-Web (/api/grpc-web/*) adapters of
 * flags.v1.EvaluationService (connect-rpc.ts), mounted as Express routes so the per-IP limit,
 * authentication and request logging are shared with REST; and the plain JSON routes next to
 * them (/api/connect/evaluate, /api/connect/bulk-evaluate).
 */

const CONNECT_PREFIX = '/api/connect';
const GRPC_WEB_PREFIX = '/api/grpc-web';

export interface ConnectDeps extends RpcDeps {
  logger: Logger;
}

/**
 * Failures that are not ours to explain (a database or cache error, a bug) are logged here and
 * answered INTERNAL with the REST envelope's generic message: Connect would otherwise pass
 * nothing to the logs, and no backend text may reach the caller. Streams are covered too.
 */
export function hideInternalErrors(logger: Logger): Interceptor {
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
    const values = rpcCallValues(principal, source, { ip: ipBucket(req.clientIp), res });
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
      // Read-only RPCs; personal tokens are refused inside with PERMISSION_DENIED
      // (docs/errors.md#other-protocols).
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
    serviceId: z.string().min(1).max(128).optional().describe('Required, except with a bound project API token, whose own service it defaults to'),
    environment: EnvironmentSchema.optional(),
    context: ContextSchema.optional(),
    defaultValue: z.unknown().optional(),
  })
  .strict();

const ConnectBulkBody = z
  .object({
    serviceId: z.string().min(1).max(128).optional().describe('Required, except with a bound project API token, whose own service it defaults to'),
    environment: EnvironmentSchema.optional(),
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
 * The plain JSON routes next to the RPCs: POST /api/connect/evaluate answers the protobuf JSON
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
      access: { capability: 'flags:read', per: 'flag' },
      csrfExempt: true,
      bodyLimit: BODY_LIMITS.evaluation,
      body: ConnectEvaluateBody,
      response: ProtoResult,
      async handler(ctx) {
        checkVersion(ctx);
        const startedAt = performance.now();
        const body = ctx.body;
        const environment = targetEnvironment(ctx.principal, body.environment) ?? DEFAULT_ENVIRONMENT;
        const grant = await evaluation.grant(ctx.principal, requiredService(ctx.principal, body.serviceId));
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
      access: { capability: 'flags:read', per: 'flag' },
      csrfExempt: true,
      bodyLimit: BODY_LIMITS.evaluation,
      body: ConnectBulkBody,
      response: z.object({ flags: z.record(z.record(z.unknown())) }),
      async handler(ctx) {
        checkVersion(ctx);
        const startedAt = performance.now();
        const body = ctx.body;
        const environment = targetEnvironment(ctx.principal, body.environment) ?? DEFAULT_ENVIRONMENT;
        const grant = await evaluation.grant(ctx.principal, requiredService(ctx.principal, body.serviceId));
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

/** The body's service, or a bound project token's own (docs/api-reference.md#project-api-tokens). */
function requiredService(principal: Principal, named: string | undefined): string {
  const serviceId = targetService(principal, named);
  if (serviceId === undefined) throw validationFailed([{ path: 'body.serviceId', message: 'Required' }]);
  return serviceId;
}
