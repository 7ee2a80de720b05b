import { z } from 'zod';
import { defineRoute, reply, PRIVATE_NO_STORE, type AnyRoute } from '../../http/route';
import { actorFromPrincipal } from '../audit/writer';
import { EnvironmentSchema } from '../../domain/environments';
import type { FlagRef } from '../flags/types';
import { FlagKeyParams, idSchema } from '../projects/common';
import { CanaryConfigRequestSchema, CanaryRecordSchema } from '../../domain/canary';
import type { CanaryService } from './service';

/**
 * Canary pipelines (docs/canary.md). Starting, advancing and aborting need `flags:write` on the
 * service's project, reading needs `flags:read`; a project the caller cannot see answers 404
 * like a missing one.
 */

/** Canaries watch live traffic: production unless another environment is named. */
const environment = EnvironmentSchema.default('production').describe('Default production');

const StartBody = CanaryConfigRequestSchema.extend({
  serviceId: idSchema,
  environment,
  ruleId: z.string().min(1).max(256).optional().describe('An existing rule whose rolloutPercentage the pipeline ramps'),
  value: z.unknown().optional().describe('Without ruleId: the value of the rule `canary` the pipeline inserts first (default true for boolean flags)'),
  changeRequestId: idSchema.optional().describe('In an environment whose change policy needs approval: an approved change request of this flag (docs/change-requests.md#canaries)'),
}).strict();

const Scope = z.object({ serviceId: idSchema, environment });
const ProjectParams = z.object({ id: idSchema });
const ListQuery = z.object({
  active: z.enum(['true', 'false']).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50),
});
const AdvanceBody = Scope.extend({ force: z.boolean().default(false) }).strict();
const AbortBody = Scope.extend({ reason: z.string().trim().min(1).max(1_000) }).strict();

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
