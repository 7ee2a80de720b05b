import { z, type ZodTypeAny } from 'zod';
import { defineRoute, reply, privateMaxAge, PRIVATE_NO_STORE, type AnyRoute } from '../../http/route';
import { actorFromPrincipal } from '../audit/writer';
import { EnvironmentSchema } from '../../domain/environments';
import type { FlagRef } from '../flags/types';
import { FlagKeyParams, idSchema } from '../projects/common';
import { AUTO_ROLLBACK_DEFAULTS } from './impact';
import { AlertsResponse, AutoRollbackResponse, HealthResponse, HeatmapResponse, MetricsResponse, StaleFlagsResponse, ToggleImpactResponse } from './schemas';
import type { InsightsService } from './service';
import { rangeParam } from '../analytics/queries/range';

/**
 * Flag insights (flag analysis, project health and heatmap, alerts: docs/insights.md). Reads need
 * `flags:read` on the project (named by the flag's service or the path's project id; a project
 * the caller cannot see is 404 like a missing one); auto-rollback's POST needs `flags:write`.
 */

const ProjectParams = z.object({ id: idSchema });
/** Insights look at live traffic: production unless another environment is named. */
const environment = EnvironmentSchema.default('production').describe('Default production');
const windowMinutes = z.coerce.number().int().min(1).max(1_440).default(AUTO_ROLLBACK_DEFAULTS.windowMinutes).describe(`Minutes compared before and after the change (1-1440, default ${AUTO_ROLLBACK_DEFAULTS.windowMinutes})`);
const FLAG_RANGES = ['1h', '24h', '7d', '30d'] as const;

const FlagQuery = z.object({
  serviceId: idSchema,
  environment,
  range: rangeParam(FLAG_RANGES, '24h'),
  windowMinutes,
});

const RollbackLimits = {
  maxErrorRateDelta: z.number().min(0).max(1).default(AUTO_ROLLBACK_DEFAULTS.maxErrorRateDelta).describe(`Error-rate rise (0-1) that trips; default ${AUTO_ROLLBACK_DEFAULTS.maxErrorRateDelta}`),
  maxLatencyDeltaMs: z.number().min(0).max(600_000).default(AUTO_ROLLBACK_DEFAULTS.maxLatencyDeltaMs).describe(`p99 latency rise in ms that trips; default ${AUTO_ROLLBACK_DEFAULTS.maxLatencyDeltaMs}`),
};
const RollbackBody = z
  .object({
    serviceId: idSchema,
    environment,
    dryRun: z.boolean().default(false),
    ...RollbackLimits,
    windowMinutes: z.number().int().min(1).max(1_440).default(AUTO_ROLLBACK_DEFAULTS.windowMinutes),
  })
  .strict();
const RollbackQuery = z
  .object({
    serviceId: idSchema,
    environment,
    dryRun: z.enum(['true', 'false']).optional().describe('Ignored: GET is always a dry run'),
    maxErrorRateDelta: z.coerce.number().min(0).max(1).default(AUTO_ROLLBACK_DEFAULTS.maxErrorRateDelta),
    maxLatencyDeltaMs: z.coerce.number().min(0).max(600_000).default(AUTO_ROLLBACK_DEFAULTS.maxLatencyDeltaMs),
    windowMinutes,
  });

/** Per-user answers over live data: private, and fresh for a few seconds only. */

export function insightRoutes(deps: { insights: InsightsService }): AnyRoute[] {
  const { insights } = deps;
  const tags = ['insights'];

  /** A read of one flag's traffic (FlagQuery), cached briefly. */
  const flagReport = (path: string, summary: string, response: ZodTypeAny, answer: (ref: FlagRef, query: z.infer<typeof FlagQuery>) => Promise<unknown>) =>
    defineRoute({
      method: 'get',
      path,
      summary,
      tags,
      response,
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      params: FlagKeyParams,
      query: FlagQuery,
      async handler({ params, query }) {
        const body = await answer({ key: params.key, serviceId: query.serviceId, environment: query.environment }, query);
        return reply(200, body, privateMaxAge(15));
      },
    });

  return [
    flagReport(
      '/api/flags/:key/metrics',
      'Evaluation metrics of one flag: summary, realtime, breakdowns, time series with percentiles, toggle impact',
      MetricsResponse,
      (ref, query) => insights.metrics(ref, query.range, query.windowMinutes),
    ),
    flagReport(
      '/api/flags/:key/toggle-impact',
      'Errors and latency before and after the latest toggle in the range, with a verdict',
      ToggleImpactResponse,
      (ref, query) => insights.toggleImpact(ref, query.range, query.windowMinutes),
    ),
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/auto-rollback',
      summary: 'Judge the latest change on the windows around it; when tripped (and not dryRun) roll back to the version before it and alert',
      tags,
      response: AutoRollbackResponse,
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.body.serviceId },
      params: FlagKeyParams,
      body: RollbackBody,
      async handler(ctx) {
        const { params, body, principal, granted } = ctx;
        const actor = actorFromPrincipal(principal, { ip: ctx.ip, userAgent: ctx.userAgent });
        const result = await insights.autoRollback(actor, granted[0].orgId, { key: params.key, serviceId: body.serviceId, environment: body.environment }, body);
        return reply(200, result, PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/flags/:key/auto-rollback',
      summary: 'What auto-rollback would decide now (always a dry run: changes nothing)',
      tags,
      response: AutoRollbackResponse,
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      params: FlagKeyParams,
      query: RollbackQuery,
      async handler(ctx) {
        const { params, query, principal, granted } = ctx;
        const actor = actorFromPrincipal(principal, { ip: ctx.ip, userAgent: ctx.userAgent });
        const result = await insights.autoRollback(actor, granted[0].orgId, { key: params.key, serviceId: query.serviceId, environment: query.environment }, { ...query, dryRun: true });
        return reply(200, result, PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/stale-flags',
      summary: 'Stale-flag report: every flag of the project scored for cleanup (docs/insights.md)',
      tags,
      response: StaleFlagsResponse,
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.params.id },
      params: ProjectParams,
      async handler({ params }) {
        return reply(200, await insights.staleFlags(params.id), privateMaxAge(60));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/health',
      summary: 'Project health over the last hour: score 0-100, status per service, top degradation issues, traffic',
      tags,
      response: HealthResponse,
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.params.id },
      params: ProjectParams,
      async handler({ params }) {
        return reply(200, await insights.health(params.id), privateMaxAge(15));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/evaluation-heatmap',
      summary: 'Evaluations per flag and time bucket (the busiest 100 flags)',
      tags,
      response: HeatmapResponse,
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.params.id },
      params: ProjectParams,
      query: z
        .object({
          range: rangeParam(['15m', '1h', '24h', '7d'], '1h'),
          serviceId: idSchema.optional(),
          environment: EnvironmentSchema.optional(),
        }),
      async handler({ params, query }) {
        const body = await insights.heatmap(params.id, query.range, { serviceId: query.serviceId, environment: query.environment });
        return reply(200, body, privateMaxAge(15));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/alerts',
      summary: "Alert rules evaluated now on the warehouse over the caller's projects (docs/insights.md)",
      tags,
      response: AlertsResponse,
      auth: 'authenticated',
      // No projectId: every project the caller may read.
      access: { capability: 'flags:read', project: (ctx) => ctx.query.projectId },
      query: z
        .object({
          firing: z.enum(['true', 'false']).optional().describe('true: only firing alerts'),
          projectId: idSchema.optional(),
        }),
      async handler({ query, granted }) {
        const body = await insights.alerts(
          granted.map((g) => g.projectId),
          query.firing === 'true',
        );
        return reply(200, body, privateMaxAge(10));
      },
    }),
  ];
}
