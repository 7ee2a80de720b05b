import { z } from 'zod';
import { actingUser } from '../../auth/principal';
import { defineRoute, type AnyRoute } from '../../http/route';
import { EnvironmentSchema } from '../../domain/environments';
import { idSchema, limitSchema, text } from '../projects/common';
import type { WatchService } from './service';

const KeyParams = z.object({ key: text(200).pipe(z.string().min(1)) });
const Target = z.object({ serviceId: idSchema, environment: EnvironmentSchema });
const WatchSchema = z.object({
  watching: z.boolean(),
  serviceId: z.string(),
  environment: EnvironmentSchema,
  flagKey: z.string(),
  since: z.string().optional(),
});

const NotificationSchema = z.object({
  id: z.string().describe('The audit entry id'),
  projectId: z.string(),
  serviceId: z.string(),
  environment: EnvironmentSchema,
  flagKey: z.string(),
  userId: z.string().nullable(),
  actor: z.string(),
  action: z.string(),
  resourceType: z.string(),
  resourceId: z.string(),
  resourceName: z.string().nullable(),
  changes: z.array(z.object({ field: z.string(), oldValue: z.unknown(), newValue: z.unknown() })),
  metadata: z.record(z.unknown()),
  timestamp: z.string(),
  read: z.boolean(),
});

/**
 * Watching and notifications (docs/api-reference.md#watching-and-notifications): per user, so
 * sessions and personal tokens only.
 */
export function watchRoutes(deps: { watch: WatchService }): AnyRoute[] {
  const { watch } = deps;
  return [
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/watch',
      summary: 'Watch a flag in one service and environment: changes by others appear in notifications',
      tags: ['watch'],
      auth: 'user',
      access: { capability: 'flags:read', service: (ctx) => ctx.body.serviceId },
      params: KeyParams,
      body: Target.strict(),
      response: WatchSchema,
      async handler({ principal, granted, params, body }) {
        return watch.watch(actingUser(principal)!, granted[0].projectId, { ...body, flagKey: params.key });
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/flags/:key/watch',
      summary: 'Stop watching a flag',
      tags: ['watch'],
      auth: 'user',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      params: KeyParams,
      query: Target,
      response: WatchSchema,
      async handler({ principal, params, query }) {
        return watch.unwatch(actingUser(principal)!, { ...query, flagKey: params.key });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/flags/:key/watch',
      summary: 'Whether the caller watches a flag',
      tags: ['watch'],
      auth: 'user',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      params: KeyParams,
      query: Target,
      response: WatchSchema,
      async handler({ principal, params, query }) {
        return watch.status(actingUser(principal)!, { ...query, flagKey: params.key });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/notifications',
      summary: 'Recent changes by others to watched flags, newest first, with unreadCount',
      tags: ['watch'],
      auth: 'user',
      query: z.object({ limit: limitSchema }),
      response: z.object({ notifications: z.array(NotificationSchema), unreadCount: z.number().int() }),
      async handler({ principal, query }) {
        return watch.notifications(actingUser(principal)!, query.limit);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/notifications',
      summary: 'Mark every notification read',
      tags: ['watch'],
      auth: 'user',
      response: z.object({ unreadCount: z.literal(0), readAt: z.string() }),
      async handler({ principal }) {
        return watch.markAllRead(actingUser(principal)!);
      },
    }),
  ];
}
