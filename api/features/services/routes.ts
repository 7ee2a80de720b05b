import { z } from 'zod';
import { defineRoute, reply, type AnyRoute } from '../../http/route';
import { callerOf, descriptionSchema, idSchema, limitSchema, nameSchema, nonEmptyPatch, offsetSchema, slugSchema, tagsSchema, text } from '../projects/common';
import type { ServiceService } from './service';

export const ServiceSchema = z.object({
  id: z.string(),
  projectId: z.string(),
  name: z.string(),
  slug: z.string(),
  description: z.string(),
  tags: z.array(z.string()),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const IdParams = z.object({ id: idSchema });

/** Services and their slugs (docs/api-reference.md#projects-and-services). */
export function serviceRoutes(deps: { services: ServiceService }): AnyRoute[] {
  const { services } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/services',
      summary: "Services of a project, or of every project the caller can read; `search` matches names and slugs",
      tags: ['services'],
      auth: 'authenticated',
      access: { capability: 'services:read', project: (ctx) => ctx.query.projectId },
      query: z.object({
        projectId: idSchema.optional(),
        search: text(200).optional(),
        limit: limitSchema,
        offset: offsetSchema,
      }),
      response: z.object({ services: z.array(ServiceSchema), total: z.number().int(), limit: z.number().int(), offset: z.number().int() }),
      async handler({ granted, query }) {
        return services.list(granted, query);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/services',
      summary: 'Create a service in a project (slug derived from the name when absent; unique per project)',
      tags: ['services'],
      auth: 'authenticated',
      access: { capability: 'services:write', project: (ctx) => ctx.body.projectId },
      status: 201,
      body: z
        .object({
          projectId: idSchema,
          name: nameSchema,
          slug: slugSchema.optional(),
          description: descriptionSchema.optional(),
          tags: tagsSchema.optional(),
        })
        .strict(),
      response: ServiceSchema,
      async handler(ctx) {
        return services.create(callerOf(ctx), ctx.body);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/services/by-slug/:slug',
      summary: 'A service by slug; pass projectId when the slug exists in several of your projects',
      tags: ['services'],
      auth: 'authenticated',
      access: { capability: 'services:read', project: (ctx) => ctx.query.projectId, hiddenAs: 'Service' },
      params: z.object({ slug: slugSchema }),
      query: z.object({ projectId: idSchema.optional() }),
      response: ServiceSchema,
      async handler({ granted, params }) {
        return services.getBySlug(granted, params.slug);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/services/:id',
      summary: 'A service',
      tags: ['services'],
      auth: 'authenticated',
      access: { capability: 'services:read', service: (ctx) => ctx.params.id },
      params: IdParams,
      response: ServiceSchema,
      async handler({ params }) {
        return services.get(params.id);
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/services/:id',
      summary: 'Change a service',
      tags: ['services'],
      auth: 'authenticated',
      access: { capability: 'services:write', service: (ctx) => ctx.params.id },
      params: IdParams,
      body: nonEmptyPatch({
        name: nameSchema.optional(),
        slug: slugSchema.optional(),
        description: descriptionSchema.optional(),
        tags: tagsSchema.optional(),
      }),
      response: ServiceSchema,
      async handler(ctx) {
        return services.update(callerOf(ctx), ctx.params.id, ctx.body);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/services/:id',
      summary: 'Delete a service and all its flags',
      tags: ['services'],
      auth: 'authenticated',
      access: { capability: 'services:delete', service: (ctx) => ctx.params.id },
      status: 204,
      params: IdParams,
      async handler(ctx) {
        await services.delete(callerOf(ctx), ctx.params.id);
        return reply(204);
      },
    }),
  ];
}
