import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../http/route';
import { idSchema, signingSecretSchema, targetUrlSchema } from '../projects/common';
import type { Analytics } from '../../../analytics/client';
import type { OutboundClient } from '../../http/outbound';
import type { Logger } from '../../infra/logger';
import type { DeliveryQueue } from '../webhooks/deliveries';
import { AnalyticsExporter, EXPORT_DATA_TYPES } from './export';
import { rangeParam, windowOf } from './queries/range';


/**
 * POST /api/analytics/export (docs/analytics.md). It sends the project's raw events to an address
 * the caller chooses, so it needs what configuring a webhook needs: `settings:manage` on the
 * project (owner and admin roles, project tokens with manage_settings, personal tokens of the admin
 * tier).
 */
export function analyticsExportRoutes(deps: { analytics: Analytics; outbound: OutboundClient; deliveries: DeliveryQueue; logger: Logger }): AnyRoute[] {
  const exporter = new AnalyticsExporter(deps);
  return [
    defineRoute({
      method: 'post',
      path: '/api/analytics/export',
      summary: "Send a period's evaluation and outcome events to a webhook, signed with HMAC-SHA256",
      tags: ['analytics'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', project: (ctx) => ctx.body.projectId },
      bodyLimit: 16 * 1024,
      body: z
        .object({
          projectId: idSchema,
          destination: z.literal('webhook').describe('Currently only webhook'),
          webhookUrl: targetUrlSchema,
          signingSecret: signingSecretSchema.optional(),
          dataTypes: z
            .array(z.enum(EXPORT_DATA_TYPES))
            .min(1)
            .max(EXPORT_DATA_TYPES.length)
            .refine((types) => new Set(types).size === types.length, 'must not repeat')
            .default([...EXPORT_DATA_TYPES]),
          period: rangeParam(['1h', '24h', '7d', '30d'], '24h'),
        })
        .strict(),
      response: z.object({ ok: z.literal(true), exported: z.object({ evaluations: z.number().int(), outcomes: z.number().int() }) }),
      async handler({ body }) {
        const exported = await exporter.run({
          projectId: body.projectId,
          webhookUrl: body.webhookUrl,
          signingSecret: body.signingSecret,
          dataTypes: body.dataTypes,
          window: windowOf(body.period),
        });
        return { ok: true, exported };
      },
    }),
  ];
}
