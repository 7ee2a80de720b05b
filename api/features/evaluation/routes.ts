import { z } from 'zod';
import { needsPermission } from '../../auth/access';
import { notFound, validationFailed } from '../../http/errors';
import { HANDLED, defineRoute, type AnyRoute } from '../../http/route';
import { EnvironmentSchema } from '../../domain/environments';
import { targetEnvironment, targetService } from './access';
import type { ContextRing } from './contexts';
import type { EvaluationLog } from './evaluation-log';
import { OFREP_POLLING_INTERVAL_MS, etagMatches } from './ofrep';
import { BATCH_LIMIT, DEMO_BATCH_LIMIT } from './schemas';
import { DEFAULT_ENVIRONMENT, type EvaluationService } from './service';

export interface EvaluationRouteDeps {
  evaluation: EvaluationService;
  /** Public address of the data plane for /api/sdk-config; the request's own origin when unset. */
  publicDataUrl?: string;
  limits: { perIp: number; perToken: number; perService: number; windowSeconds: number };
}

/**
 * Routes served on both listeners (evaluation and SDK routes,
 * docs/api-reference.md#addresses-and-processes).
 */
export function evaluationRoutes(deps: EvaluationRouteDeps): AnyRoute[] {
  const { evaluation } = deps;

  return [
    defineRoute({
      method: 'get',
      path: '/api/sdk-config',
      summary: 'What an SDK needs to start: endpoints, stream URL, polling interval, flags snapshot ETag, rate limits',
      tags: ['evaluation'],
      auth: 'public',
      sdk: true,
      access: { capability: 'flags:read', per: 'flag' },
      query: z.object({
        serviceId: z.string().min(1).max(128).optional().describe('Required, except with a bound project API token, whose own service it defaults to'),
        environment: EnvironmentSchema.optional(),
      }),
      response: SdkConfigSchema,
      async handler(ctx) {
        // A bound project token reads its own service and environment (docs/api-reference.md#project-api-tokens).
        const serviceId = targetService(ctx.principal, ctx.query.serviceId);
        if (serviceId === undefined) throw validationFailed([{ path: 'query.serviceId', message: 'Required' }]);
        const environment = targetEnvironment(ctx.principal, ctx.query.environment) ?? DEFAULT_ENVIRONMENT;
        const grant = await evaluation.grant(ctx.principal, serviceId);
        const snapshot = grant.service.environments[environment];
        const base = deps.publicDataUrl ?? `${ctx.req.protocol}://${ctx.req.get('host')}`;
        const qs = `serviceId=${encodeURIComponent(serviceId)}&environment=${environment}`;
        const flagsEtag = snapshot.etag(grant.visibility);
        ctx.res.setHeader('ETag', flagsEtag);
        ctx.res.setHeader('Cache-Control', 'private, no-cache');
        if (etagMatches(ctx.req.get('if-none-match'), flagsEtag)) {
          ctx.res.status(304).end();
          return HANDLED;
        }
        let flagCount = 0;
        for (const _flag of snapshot.visible(grant.visibility)) flagCount++;
        return {
          serviceId,
          environment,
          dataUrl: base,
          streamUrl: `${base}/api/flags/stream?${qs}`,
          pollingIntervalMs: OFREP_POLLING_INTERVAL_MS,
          flagsEtag,
          flagCount,
          demo: grant.demo,
          endpoints: {
            evaluate: `${base}/api/flags/evaluate`,
            batch: `${base}/api/flags/evaluate/batch`,
            ofrep: `${base}/api/ofrep/v1`,
            connect: `${base}/api/connect`,
            grpcWeb: `${base}/api/grpc-web`,
            stream: `${base}/api/flags/stream?${qs}`,
            connectStream: `${base}/api/connect/stream?${qs}`,
            telemetry: `${base}/api/analytics/sdk-telemetry`,
          },
          headers: { serviceId: 'X-Service-Id', environment: 'X-Environment' },
          limits: {
            batch: grant.demo ? DEMO_BATCH_LIMIT : BATCH_LIMIT,
            requestsPerMinutePerIp: Math.round((deps.limits.perIp * 60) / deps.limits.windowSeconds),
            requestsPerMinutePerToken: Math.round((deps.limits.perToken * 60) / deps.limits.windowSeconds),
            requestsPerMinutePerService: Math.round((deps.limits.perService * 60) / deps.limits.windowSeconds),
          },
        };
      },
    }),
  ];
}

const SdkConfigSchema = z.object({
  serviceId: z.string(),
  environment: EnvironmentSchema,
  dataUrl: z.string().describe('Base URL of the data plane'),
  streamUrl: z.string().describe('SSE stream of flag changes for this service and environment'),
  pollingIntervalMs: z.number().describe('Minimum polling interval for clients that poll (OFREP bulk, batch)'),
  flagsEtag: z.string().describe('Weak ETag of the flags snapshot visible to the caller; changes with any flag'),
  flagCount: z.number(),
  demo: z.boolean(),
  endpoints: z.record(z.string()),
  headers: z.object({ serviceId: z.string(), environment: z.string() }),
  limits: z.record(z.number()),
});

export interface ControlRouteDeps {
  evaluation: EvaluationService;
  log: EvaluationLog;
  contexts: ContextRing;
}

const EvaluationEntry = z.object({
  timestamp: z.string(),
  flagKey: z.string(),
  serviceId: z.string(),
  environment: z.string(),
  reason: z.string(),
  variant: z.string().optional(),
  value: z.unknown(),
  latencyMs: z.number(),
  errorCode: z.string().optional(),
  targetingKeyHash: z.string().optional(),
  source: z.string(),
});

/**
 * Dashboard routes (control plane only): evaluation log and the context browser. They are for
 * users (sessions, personal tokens): a project read token ships in browser bundles and must not
 * browse other users' contexts and evaluations.
 */
export function evaluationControlRoutes(deps: ControlRouteDeps): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/evaluations',
      summary: 'Recent evaluation events (newest first) of the projects the caller may read',
      tags: ['evaluation'],
      auth: 'user',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      query: z.object({
        flagKey: z.string().min(1).max(256).optional(),
        serviceId: z.string().min(1).max(128).optional(),
        limit: z.coerce.number().int().min(1).max(1000).default(100),
        since: z
          .string()
          .max(64)
          .refine((s) => {
            const ms = Date.parse(s);
            return ms >= 0 && ms < 253402300800000;
          }, 'must be an ISO date between 1970 and 9999')
          .optional(),
      }),
      response: z.object({ evaluations: z.array(EvaluationEntry), count: z.number(), limit: z.number() }),
      async handler(ctx) {
        const { flagKey, serviceId, limit, since } = ctx.query;
        const projectIds = ctx.granted.map((g) => g.projectId);
        const evaluations = await deps.log.list({ projectIds, serviceId, flagKey, since: since ? new Date(since) : undefined, limit });
        return { evaluations, count: evaluations.length, limit };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/evaluations',
      summary: "Clear a flag's evaluation events (needs delete permission on the flag's project)",
      tags: ['evaluation'],
      auth: 'user',
      access: { capability: 'flags:delete', service: (ctx) => ctx.query.serviceId },
      query: z.object({ flagKey: z.string().min(1).max(256), serviceId: z.string().min(1).max(128).optional() }),
      response: z.object({ flagKey: z.string(), deleted: z.number() }),
      async handler(ctx) {
        const { flagKey, serviceId } = ctx.query;
        // Clearing in none of the caller's projects is refused: no project grants the permission.
        if (ctx.granted.length === 0) throw needsPermission('flags:delete');
        const projectIds = ctx.granted.map((g) => g.projectId);
        const deleted = await deps.log.clear({ projectIds, serviceId, flagKey });
        return { flagKey, deleted };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/contexts',
      summary: "Recent evaluation contexts grouped by targetingKey (this instance's ring of about 1,000), or one context's flag values with `key`",
      tags: ['evaluation'],
      auth: 'user',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      query: z.object({
        serviceId: z.string().min(1).max(128),
        environment: EnvironmentSchema.optional(),
        key: z.string().min(1).max(1024).optional().describe('A targetingKey: answer only its flag-to-value map'),
      }),
      async handler(ctx) {
        const { serviceId, environment, key } = ctx.query;
        if (key !== undefined) {
          const context = deps.contexts.context(serviceId, key, environment);
          if (context === undefined) throw notFound('Context');
          return { serviceId, environment: environment ?? null, ...context };
        }
        const contexts = deps.contexts.summaries(serviceId, environment);
        return { serviceId, environment: environment ?? null, contexts, total: contexts.length };
      },
    }),
  ];
}
