import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../http/route';
import { EnvironmentSchema } from '../../domain/environments';
import { callerOf, FlagKeyParams, idSchema, limitSchema, nameSchema } from '../projects/common';
import type { TriggerService } from './service';
import { TRIGGER_ACTIONS } from './types';

const TriggerSchema = z.object({
  id: z.string(),
  name: z.string(),
  action: z.enum(TRIGGER_ACTIONS),
  flagKey: z.string(),
  serviceId: z.string(),
  environment: EnvironmentSchema,
  projectId: z.string(),
  createdBy: z.string().nullable(),
  createdAt: z.string(),
  lastExecutedAt: z.string().nullable(),
  executionCount: z.number().int(),
  revokedAt: z.string().nullable(),
});

const environment = EnvironmentSchema;

/**
 * Triggers (docs/api-reference.md#triggers): management needs flags rights on the service's
 * project; execution needs only the URL.
 */
export function triggerRoutes(deps: { triggers: TriggerService }): AnyRoute[] {
  const { triggers } = deps;
  return [
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/triggers',
      summary: 'Create a trigger URL for a flag; the URL and its token are returned only here',
      tags: ['triggers'],
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.body.serviceId },
      // Personal tokens never create trigger URLs (docs/api-reference.md#personal-access-tokens).
      noPersonalTokens: true,
      status: 201,
      params: FlagKeyParams,
      body: z
        .object({
          serviceId: idSchema,
          environment: environment.default('development').describe('Defaults to development, like the other per-flag routes'),
          action: z.enum(TRIGGER_ACTIONS),
          name: nameSchema,
        })
        .strict(),
      response: TriggerSchema.extend({ url: z.string(), token: z.string() }),
      async handler(ctx) {
        const { params, body } = ctx;
        return triggers.create(callerOf(ctx), ctx.granted[0].projectId, { key: params.key, serviceId: body.serviceId, environment: body.environment }, body);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/flags/:key/triggers',
      summary: "A flag's active triggers (never their tokens)",
      tags: ['triggers'],
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      params: FlagKeyParams,
      query: z.object({ serviceId: idSchema, environment: environment.optional().describe('All environments when absent') }),
      response: z.object({ triggers: z.array(TriggerSchema) }),
      async handler({ params, query }) {
        return { triggers: await triggers.list(query.serviceId, params.key, query.environment) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/triggers',
      summary: "A service's active triggers across its flags, by flag key (never their tokens)",
      tags: ['triggers'],
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      query: z.object({ serviceId: idSchema, limit: limitSchema }),
      response: z.object({ triggers: z.array(TriggerSchema), hasMore: z.boolean().describe('More than `limit` are active') }),
      async handler({ query }) {
        return triggers.listInService(query.serviceId, query.limit);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/flags/:key/triggers/:triggerId',
      summary: 'Revoke a trigger; its URL answers 404 from then on',
      tags: ['triggers'],
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.query.serviceId },
      status: 204,
      params: FlagKeyParams.extend({ triggerId: idSchema }),
      query: z.object({ serviceId: idSchema }),
      async handler(ctx) {
        await triggers.revoke(callerOf(ctx), ctx.granted[0].projectId, ctx.query.serviceId, ctx.params.key, ctx.params.triggerId);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/triggers/:token',
      summary: 'Execute a trigger (no authentication: the URL token is the capability); 30 per minute per token',
      tags: ['triggers'],
      auth: 'public',
      // Nothing a cross-site request could forge beyond what knowing the URL already allows.
      csrfExempt: true,
      params: z.object({ token: z.string().min(1).max(256) }),
      response: z.object({
        success: z.literal(true),
        triggerId: z.string(),
        action: z.enum(TRIGGER_ACTIONS),
        changed: z.boolean().describe('False when the flag already was in the requested state'),
        flag: z.object({
          key: z.string(),
          serviceId: z.string(),
          environment: EnvironmentSchema,
          enabled: z.boolean(),
          version: z.number().int(),
          updatedAt: z.string(),
        }),
      }),
      async handler({ params, ip, userAgent, res }) {
        return triggers.execute(params.token, { ip, userAgent, res });
      },
    }),
  ];
}
