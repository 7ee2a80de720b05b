import { z } from 'zod';
import { defineRoute, reply, PRIVATE_NO_STORE, type AnyRoute } from '../../http/route';
import { actorFromPrincipal } from '../audit/writer';
import { EnvironmentSchema } from '../../domain/environments';
import type { FlagRef } from '../flags/types';
import { FlagKeyParams, idSchema } from '../projects/common';
import type { CanaryService } from './service';

/**
 * Canary pipelines (docs/canary.md). Starting, advancing and aborting need `flags:write`
 * on the service's project, reading needs `flags:read`; a project the caller cannot see answers
 * 404 like a missing one.
 */

/** Canaries watch live traffic: production unless another environment is named. */
const environment = EnvironmentSchema.default('production').describe('Default production');
const percent = z.number().finite().gt(0).max(100);

const StartBody = z
  .object({
    serviceId: idSchema,
    environment,
    initialRolloutPercent: percent,
    targetRolloutPercent: percent,
    rampStepPercent: percent,
    soakPeriodMinutes: z.number().finite().min(0.05).max(10_080).describe('Minutes each stage soaks; fractions down to 0.05 (3 s)'),
    errorRateGateDelta: z.number().finite().min(0).max(1).describe('Tolerated rise of the error rate (absolute, 0-1)'),
    latencyGateDeltaMs: z.number().finite().min(0).max(600_000).describe('Tolerated rise of the mean latency in ms'),
    autoRollbackOnBreach: z.boolean(),
    minSamplesPerCohort: z.number().int().min(1).max(10_000_000).default(100),
    maxWaitMinutes: z.number().finite().min(0).max(10_080).optional().describe('How long a stage waits for enough data past its soak; default max(10 soaks, 1 minute)'),
    alpha: z.number().finite().gt(0).max(0.5).default(0.05),
    ruleId: z.string().min(1).max(256).optional().describe('An existing rule whose rolloutPercentage the pipeline ramps'),
    value: z.unknown().optional().describe('Without ruleId: the value of the rule `canary` the pipeline inserts first (default true for boolean flags)'),
  })
  .strict();

const Scope = z.object({ serviceId: idSchema, environment });
const ProjectParams = z.object({ id: idSchema });
const ListQuery = z.object({
  active: z.enum(['true', 'false']).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50),
});
const AdvanceBody = Scope.extend({ force: z.boolean().default(false) }).strict();
const AbortBody = Scope.extend({ reason: z.string().trim().min(1).max(1_000) }).strict();

const Interval = z.object({ estimate: z.number().nullable(), lower: z.number().nullable(), upper: z.number().nullable() });
const Cohort = z.object({ exposures: z.number(), errors: z.number(), errorRate: z.number(), latencyP50: z.number().nullable(), latencyP99: z.number().nullable() });
const Gate = z.object({
  decision: z.enum(['pass', 'fail', 'wait']),
  reason: z.string(),
  test: z.string(),
  alpha: z.number(),
  treatment: Cohort,
  control: Cohort,
  errorRateDelta: Interval,
  latencyDeltaMs: Interval,
  srm: z.object({ pValue: z.number(), ok: z.boolean() }),
});
const Stage = z.object({ index: z.number().int(), rolloutPercent: z.number(), startedAt: z.string(), endedAt: z.string().optional(), gate: Gate.optional(), forcedBy: z.string().optional() });
export const CanaryRecordSchema = z.object({
  id: z.string(),
  flagKey: z.string(),
  serviceId: z.string(),
  environment: z.string(),
  ruleId: z.string(),
  status: z.enum(['running', 'paused', 'completed', 'rolled_back', 'aborted']),
  statusReason: z.string().nullable(),
  config: z.record(z.unknown()),
  currentStage: Stage.nullable(),
  completedStages: z.array(Stage),
  remainingSoakSeconds: z.number(),
  health: z.object({ status: z.enum(['pending', 'healthy', 'insufficient_data', 'breach']), checkedAt: z.string().nullable(), gate: Gate.nullable() }),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const refOf = (key: string, scope: { serviceId: string; environment: FlagRef['environment'] }): FlagRef => ({ key, serviceId: scope.serviceId, environment: scope.environment });

export function canaryRoutes(deps: { canaries: CanaryService }): AnyRoute[] {
  const { canaries } = deps;
  const tags = ['canary'];
  return [
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/canary',
      summary: "Start a canary pipeline ramping one rule's rollout through gated stages (409 when one is active)",
      tags,
      status: 201,
      response: CanaryRecordSchema,
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.body.serviceId },
      params: FlagKeyParams,
      body: StartBody,
      async handler(ctx) {
        const { body, principal, granted } = ctx;
        const actor = actorFromPrincipal(principal, { ip: ctx.ip, userAgent: ctx.userAgent });
        return reply(201, await canaries.start(actor, granted[0], refOf(ctx.params.key, body), body), PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/flags/:key/canary',
      summary: "The flag's active canary pipeline, else its latest: stages, gate evidence, remaining soak, health",
      tags,
      response: CanaryRecordSchema,
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      params: FlagKeyParams,
      query: Scope,
      async handler(ctx) {
        return reply(200, await canaries.get(refOf(ctx.params.key, ctx.query)), PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/canaries',
      summary: "A project's canary pipelines, active first, then newest first (`active=true`: only running or paused); as last persisted",
      tags,
      response: z.object({ canaries: z.array(CanaryRecordSchema) }),
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.params.id },
      params: ProjectParams,
      query: ListQuery,
      async handler(ctx) {
        const canaryList = await canaries.list(ctx.granted[0].projectId, { activeOnly: ctx.query.active === 'true', limit: ctx.query.limit });
        return reply(200, { canaries: canaryList }, PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/canary/advance',
      summary: 'End the current stage: force skips soak and gate (audited as forced); otherwise the gate runs now and must pass (409 with the gate)',
      tags,
      response: CanaryRecordSchema,
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.body.serviceId },
      params: FlagKeyParams,
      body: AdvanceBody,
      async handler(ctx) {
        const actor = actorFromPrincipal(ctx.principal, ctx);
        return reply(200, await canaries.advance(actor, ctx.granted[0], refOf(ctx.params.key, ctx.body), ctx.body.force), PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/canary/abort',
      summary: 'Abort the active pipeline: the flag content from before it is restored as a new version',
      tags,
      response: CanaryRecordSchema,
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.body.serviceId },
      params: FlagKeyParams,
      body: AbortBody,
      async handler(ctx) {
        const actor = actorFromPrincipal(ctx.principal, ctx);
        return reply(200, await canaries.abort(actor, refOf(ctx.params.key, ctx.body), ctx.body.reason), PRIVATE_NO_STORE);
      },
    }),
  ];
}
