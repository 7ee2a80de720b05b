import { z } from 'zod';
import { defineRoute, reply, type AnyRoute } from '../../http/route';
import { PROJECT_ROLES } from '../members/types';
import { GuardsSchema } from '../../domain/guards';
import { callerOf, descriptionSchema, idSchema, nameSchema, nonEmptyPatch, slugSchema, tagsSchema } from './common';
import type { ProjectService } from './service';

export const ProjectSchema = z.object({
  id: z.string(),
  orgId: z.string(),
  name: z.string(),
  slug: z.string(),
  description: z.string(),
  tags: z.array(z.string()),
  requireWriteToken: z.boolean().describe('Browser events for its services need X-Write-Token, a project API token with write (docs/api-reference.md#browser-analytics)'),
  guardrailAutoRollback: z.boolean().describe('A tripped guardrail check after a production change rolls it back; false: only notify and record (docs/guardrails.md)'),
  guardrailWindowMinutes: z.number().int().describe('Minutes a production change is watched before the guardrail judges it (1-1440)'),
  requireInProcessCompatible: z
    .boolean()
    .describe("Flag and cohort writes that would add targeting flagd's in-process providers cannot evaluate are refused with 400 (docs/flagd.md#compatibility)"),
  guardrailGuards: GuardsSchema.describe('Prometheus guards asked at every guardrail check; a breach trips it (docs/guardrails.md#prometheus-guards)'),
  createdAt: z.string(),
  updatedAt: z.string(),
  role: z.enum(PROJECT_ROLES).nullable().describe("The caller's role; null for a project API token"),
});

const IdParams = z.object({ id: idSchema });

/** Projects (docs/api-reference.md#projects-and-services). */
export function projectRoutes(deps: { projects: ProjectService }): AnyRoute[] {
  const { projects } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects',
      summary: 'Projects the caller can access, each with the caller\'s role',
      tags: ['projects'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project: () => undefined },
      response: z.object({ projects: z.array(ProjectSchema) }),
      async handler({ granted }) {
        return { projects: await projects.list(granted) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects',
      summary: 'Create a project; the creator becomes its owner',
      tags: ['projects'],
      auth: 'user',
      access: {
        capability: 'org:manage',
        // Default: the caller's personal organization.
        org: (ctx) => ctx.body.orgId ?? projects.personalOrgOf(ctx.principal),
        refused: 'creating projects needs the owner or admin role in the organization',
      },
      adminTier: true,
      status: 201,
      body: z
        .object({
          name: nameSchema,
          description: descriptionSchema.optional(),
          slug: slugSchema.optional().describe('Derived from the name when absent; unique per organization'),
          tags: tagsSchema.optional(),
          orgId: idSchema.optional().describe("Default: the caller's personal organization; the caller must be its owner or admin"),
        })
        .strict(),
      response: ProjectSchema,
      async handler(ctx) {
        return projects.create(callerOf(ctx), ctx.body);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/by-slug/:slug',
      summary: 'A project by slug (slugs are unique per organization; pass orgId when ambiguous)',
      tags: ['projects'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project: () => undefined },
      params: z.object({ slug: z.string().min(1).max(64) }),
      query: z.object({ orgId: idSchema.optional() }),
      response: ProjectSchema,
      async handler({ granted, params, query }) {
        return projects.getBySlug(granted, params.slug, query.orgId);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/:id',
      summary: 'A project',
      tags: ['projects'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.params.id },
      params: IdParams,
      response: ProjectSchema,
      async handler({ granted }) {
        return projects.get(granted[0]);
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/projects/:id',
      summary: 'Change project settings (manage_settings; only owners may change the slug)',
      tags: ['projects'],
      auth: 'authenticated',
      // Changing the slug also needs settings:slug (owners; ProjectService).
      access: { capability: 'settings:manage', project: (ctx) => ctx.params.id },
      adminTier: true,
      params: IdParams,
      body: nonEmptyPatch({
        name: nameSchema.optional(),
        description: descriptionSchema.optional(),
        slug: slugSchema.optional(),
        tags: tagsSchema.optional(),
        requireWriteToken: z.boolean().optional(),
        guardrailAutoRollback: z.boolean().optional(),
        guardrailWindowMinutes: z.number().int().min(1).max(1_440).optional(),
        requireInProcessCompatible: z.boolean().optional(),
        guardrailGuards: GuardsSchema.optional(),
      }),
      response: ProjectSchema,
      async handler(ctx) {
        return projects.update(callerOf(ctx), ctx.granted[0], ctx.body);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/:id',
      summary: 'Delete a project and everything in it (delete_project: owners; personal tokens need owner actions)',
      tags: ['projects'],
      auth: 'authenticated',
      access: { capability: 'project:delete', project: (ctx) => ctx.params.id },
      params: IdParams,
      status: 204,
      async handler(ctx) {
        await projects.delete(callerOf(ctx), ctx.params.id);
        return reply(204);
      },
    }),
  ];
}
