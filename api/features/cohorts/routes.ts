import { z } from 'zod';
import { BODY_LIMITS, defineRoute, reply, type AnyRoute } from '../../http/route';
import { callerOf, idSchema } from '../projects/common';
import type { CohortService } from './service';
import { CohortCreateSchema, CohortPatchSchema } from './validation';

const CohortSchema = z.object({
  id: z.string(),
  projectId: z.string(),
  name: z.string(),
  description: z.string(),
  rules: z.array(
    z.object({
      id: z.string(),
      conditions: z.array(z.object({ property: z.string(), operator: z.string(), value: z.unknown().optional() })),
    }),
  ),
  version: z.number().int(),
  createdAt: z.string(),
  updatedAt: z.string(),
  createdBy: z.string(),
  updatedBy: z.string(),
});

const ProjectParams = z.object({ id: idSchema });
const CohortParams = z.object({ id: idSchema, cohortId: idSchema });

/**
 * Cohorts under a project (docs/cohorts.md): read with flags:read (every member, read
 * tokens), written with flags:write (member role and up), as flag targeting is. Evaluate is a
 * read-only POST: read-tier personal tokens may call it
 * (docs/api-reference.md#personal-access-tokens).
 */
export function cohortRoutes(deps: { cohorts: CohortService }): AnyRoute[] {
  const { cohorts } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/cohorts',
      summary: "The project's cohorts, by name",
      tags: ['cohorts'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.params.id },
      params: ProjectParams,
      response: z.object({ cohorts: z.array(CohortSchema) }),
      async handler({ params }) {
        return { cohorts: await cohorts.list(params.id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/cohorts',
      summary: 'Create a cohort: a context is a member when any rule has all its conditions holding (flag condition operators, no in_cohort)',
      tags: ['cohorts'],
      auth: 'authenticated',
      access: { capability: 'flags:write', project: (ctx) => ctx.params.id },
      status: 201,
      bodyLimit: BODY_LIMITS.flagWrite,
      params: ProjectParams,
      body: CohortCreateSchema,
      response: CohortSchema,
      async handler(ctx) {
        return cohorts.create(callerOf(ctx), ctx.params.id, ctx.body);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/cohorts/:cohortId',
      summary: 'A cohort',
      tags: ['cohorts'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.params.id },
      params: CohortParams,
      response: CohortSchema,
      async handler({ params }) {
        return cohorts.get(params.id, params.cohortId);
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/projects/:id/cohorts/:cohortId',
      summary: "Change a cohort's name, description or rules; every flag that uses it is recompiled on every replica",
      tags: ['cohorts'],
      auth: 'authenticated',
      access: { capability: 'flags:write', project: (ctx) => ctx.params.id },
      bodyLimit: BODY_LIMITS.flagWrite,
      params: CohortParams,
      body: CohortPatchSchema,
      response: CohortSchema,
      async handler(ctx) {
        const { version, ...patch } = ctx.body;
        return cohorts.update(callerOf(ctx), ctx.params.id, ctx.params.cohortId, patch, version);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/:id/cohorts/:cohortId',
      summary: 'Delete a cohort; 409 with the flags whose targeting still uses it',
      tags: ['cohorts'],
      auth: 'authenticated',
      access: { capability: 'flags:write', project: (ctx) => ctx.params.id },
      status: 204,
      params: CohortParams,
      async handler(ctx) {
        await cohorts.remove(callerOf(ctx), ctx.params.id, ctx.params.cohortId);
        return reply(204);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/cohorts/:cohortId/evaluate',
      summary: 'Whether a user and context are in the cohort, and the first cohort rule that matched',
      tags: ['cohorts'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.params.id },
      readOnly: true,
      bodyLimit: BODY_LIMITS.evaluation,
      params: CohortParams,
      body: z
        .object({
          userId: z.string().min(1).max(256).describe("The targeting key when the context has none"),
          context: z.record(z.unknown()).default({}).describe('Evaluation context attributes, as for flag evaluation'),
        })
        .strict(),
      response: z.object({ cohortId: z.string(), userId: z.string(), member: z.boolean(), matchedRuleId: z.string().nullable() }),
      async handler({ params, body }) {
        return cohorts.evaluate(params.id, params.cohortId, body.userId, body.context);
      },
    }),
  ];
}
