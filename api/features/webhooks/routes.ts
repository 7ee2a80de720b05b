import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../http/route';
import { callerOf, idSchema, limitSchema, nonEmptyPatch, signingSecretSchema, targetUrlSchema } from '../projects/common';
import type { WebhookService } from './service';
import { WEBHOOK_EVENTS } from './types';

const WebhookSchema = z.object({
  id: z.string(),
  projectId: z.string(),
  url: z.string(),
  events: z.array(z.enum(WEBHOOK_EVENTS)),
  active: z.boolean(),
  createdBy: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const urlSchema = targetUrlSchema.describe('http or https; must not resolve to an internal address (SSRF guard)');
const secretSchema = signingSecretSchema.describe('HMAC-SHA256 signing key; write-only. Generated (whsec_…) when absent');
const eventsSchema = z
  .array(z.enum(WEBHOOK_EVENTS))
  .min(1)
  .max(WEBHOOK_EVENTS.length)
  .transform((events) => [...new Set(events)])
  .describe('Events to receive; default the four flag events');

const AttemptSchema = z.object({
  attempt: z.number(),
  outcome: z.enum(['delivered', 'retry', 'failed', 'skipped']),
  statusCode: z.number().nullable(),
  error: z.string().nullable(),
  durationMs: z.number().nullable(),
  startedAt: z.string(),
});

const DeliverySchema = z.object({
  id: z.string().describe('Also sent as the webhook-id header; stable across retries'),
  event: z.string(),
  eventId: z.string(),
  flagKey: z.string().nullable(),
  status: z.enum(['pending', 'delivered', 'failed', 'skipped']),
  attemptCount: z.number(),
  lastStatusCode: z.number().nullable(),
  lastError: z.string().nullable(),
  createdAt: z.string(),
  completedAt: z.string().nullable(),
  attempts: z.array(AttemptSchema),
  payload: z.unknown().describe('The exact body sent: the delivery envelope {event, timestamp, data}'),
});

const IdParams = z.object({ id: idSchema });

/**
 * Webhooks, which belong to a project (docs/api-reference.md#webhooks). Every route needs
 * settings:manage on it.
 */
export function webhookRoutes(deps: { webhooks: WebhookService }): AnyRoute[] {
  const { webhooks } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/webhooks',
      summary: "A project's webhooks (never their secrets)",
      tags: ['webhooks'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', project: (ctx) => ctx.query.projectId },
      query: z.object({ projectId: idSchema }),
      response: z.object({ webhooks: z.array(WebhookSchema) }),
      async handler({ query }) {
        return { webhooks: await webhooks.list(query.projectId) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/webhooks',
      summary: 'Create a webhook; the secret is returned only in this response',
      tags: ['webhooks'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', project: (ctx) => ctx.body.projectId },
      status: 201,
      body: z
        .object({
          projectId: idSchema,
          url: urlSchema,
          secret: secretSchema.optional(),
          events: eventsSchema.optional(),
          active: z.boolean().optional(),
        })
        .strict(),
      response: WebhookSchema.extend({ secret: z.string() }),
      async handler(ctx) {
        return webhooks.create(callerOf(ctx), ctx.body);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/webhooks/:id',
      summary: 'A webhook (without its secret)',
      tags: ['webhooks'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', owner: 'Webhook', projectOf: (ctx) => webhooks.projectOf(ctx.params.id) },
      params: IdParams,
      response: WebhookSchema,
      async handler({ params }) {
        return webhooks.get(params.id);
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/webhooks/:id',
      summary: 'Change a webhook; active:false pauses deliveries and keeps the configuration',
      tags: ['webhooks'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', owner: 'Webhook', projectOf: (ctx) => webhooks.projectOf(ctx.params.id) },
      params: IdParams,
      body: nonEmptyPatch({
        url: urlSchema.optional(),
        secret: secretSchema.optional(),
        events: eventsSchema.optional(),
        active: z.boolean().optional(),
      }),
      response: WebhookSchema,
      async handler(ctx) {
        return webhooks.update(callerOf(ctx), ctx.params.id, ctx.body);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/webhooks/:id',
      summary: 'Delete a webhook and its delivery log; deliveries in flight stop',
      tags: ['webhooks'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', owner: 'Webhook', projectOf: (ctx) => webhooks.projectOf(ctx.params.id) },
      params: IdParams,
      status: 204,
      async handler(ctx) {
        await webhooks.remove(callerOf(ctx), ctx.params.id);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/webhooks/:id/test',
      summary: 'Send a signed webhook.test event (one attempt, logged with the deliveries) and report what the endpoint answered; 10 per minute per webhook',
      tags: ['webhooks'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', owner: 'Webhook', projectOf: (ctx) => webhooks.projectOf(ctx.params.id) },
      params: IdParams,
      response: z.object({
        delivered: z.boolean(),
        status: z.enum(['pending', 'delivered', 'failed', 'skipped']).describe('The delivery: pending when the attempt outlasted the wait, skipped when the webhook is paused'),
        deliveryId: z.string().describe('The delivery in GET /api/webhooks/{id}/deliveries'),
        statusCode: z.number().nullable().describe("The endpoint's HTTP status"),
        durationMs: z.number().nullable(),
        error: z.string().nullable(),
      }),
      async handler({ params }) {
        return webhooks.testSend(params.id);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/webhooks/:id/deliveries',
      summary: 'Recent deliveries, newest first, with every attempt (status code, timing, error)',
      tags: ['webhooks'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', owner: 'Webhook', projectOf: (ctx) => webhooks.projectOf(ctx.params.id) },
      params: IdParams,
      query: z.object({ limit: limitSchema, cursor: idSchema.optional().describe('nextCursor of the previous page') }),
      response: z.object({ deliveries: z.array(DeliverySchema), hasMore: z.boolean(), nextCursor: z.string().nullable() }),
      async handler({ params, query }) {
        return webhooks.deliveries(params.id, query);
      },
    }),
  ];
}
