import { z } from 'zod';
import { actingUser } from '../../auth/principal';
import { defineRoute, type AnyRoute } from '../../http/route';
import { idSchema, nameSchema, signingSecretSchema, targetUrlSchema } from '../projects/common';
import type { AlertChannelService } from './service';
import { ALERT_CHANNEL_TYPES } from './types';

const ChannelSchema = z.object({
  id: z.string(),
  orgId: z.string(),
  name: z.string(),
  type: z.enum(ALERT_CHANNEL_TYPES),
  enabled: z.boolean(),
  destination: z.string().describe('The destination with secrets masked'),
  recipients: z
    .array(z.object({ email: z.string(), confirmed: z.boolean() }))
    .optional()
    .describe('E-mail channels: each address and whether it confirmed; only confirmed addresses are mailed'),
  createdBy: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const url = targetUrlSchema.describe('http or https; must not resolve to an internal address (SSRF guard)');
const common = { name: nameSchema, enabled: z.boolean().optional() };

const CreateChannel = z.discriminatedUnion('type', [
  z.object({ type: z.literal('chat'), ...common, url: url.describe('Slack-style incoming webhook URL; receives {text}') }).strict(),
  z
    .object({
      type: z.literal('paging'),
      ...common,
      routingKey: z.string().trim().min(1).max(128).refine((s) => !s.includes('\u0000'), 'must not contain NUL characters').describe('PagerDuty Events v2 integration (routing) key'),
      url: url.optional().describe('Events v2 endpoint; default https://events.pagerduty.com/v2/enqueue'),
    })
    .strict(),
  z.object({ type: z.literal('email'), ...common, recipients: z.array(z.string().trim().email().max(254)).min(1).max(20) }).strict(),
  z
    .object({
      type: z.literal('webhook'),
      ...common,
      url,
      secret: signingSecretSchema.optional().describe('Signing key (X-Svc-Signature and Standard Webhooks); generated when absent'),
    })
    .strict(),
]);

const OrgParams = z.object({ orgId: idSchema });
const ChannelParams = z.object({ orgId: idSchema, channelId: idSchema });

const MANAGE_REFUSED = 'managing alert channels needs the owner or admin role in the organization';

/**
 * Organization alert channels (docs/api-reference.md#organizations): every member of the
 * organization sees them, owners and admins manage them.
 */
export function alertChannelRoutes(deps: { alertChannels: AlertChannelService }): AnyRoute[] {
  const { alertChannels } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/orgs/:orgId/alert-channels',
      summary: "The organization's alert channels (inherited by all its projects)",
      tags: ['alert-channels'],
      auth: 'user',
      access: { capability: 'org:view', org: (ctx) => ctx.params.orgId, refused: MANAGE_REFUSED },
      params: OrgParams,
      response: z.object({ channels: z.array(ChannelSchema) }),
      async handler({ params }) {
        return { channels: await alertChannels.list(params.orgId) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/orgs/:orgId/alert-channels',
      summary: 'Create an alert channel (organization owners and admins); each e-mail recipient confirms once by a mailed token',
      tags: ['alert-channels'],
      auth: 'user',
      access: { capability: 'org:manage', org: (ctx) => ctx.params.orgId, refused: MANAGE_REFUSED },
      status: 201,
      params: OrgParams,
      body: CreateChannel,
      response: ChannelSchema.extend({ secret: z.string().optional().describe('Generic webhooks only; shown once') }),
      async handler({ principal, params, body }) {
        return alertChannels.create(actingUser(principal)!, params.orgId, body);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/orgs/:orgId/alert-channels/:channelId',
      summary: 'Delete an alert channel',
      tags: ['alert-channels'],
      auth: 'user',
      access: { capability: 'org:manage', org: (ctx) => ctx.params.orgId, refused: MANAGE_REFUSED },
      status: 204,
      params: ChannelParams,
      async handler({ params }) {
        await alertChannels.remove(params.orgId, params.channelId);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/orgs/:orgId/alert-channels/:channelId/test',
      summary: 'Send a test alert (one attempt) and report what the destination answered; needs a verified e-mail, throttled per user and recipient',
      tags: ['alert-channels'],
      auth: 'user',
      access: { capability: 'org:manage', org: (ctx) => ctx.params.orgId, refused: MANAGE_REFUSED },
      params: ChannelParams,
      response: z.object({
        ok: z.boolean(),
        status: z.enum(['queued', 'pending', 'delivered', 'failed', 'skipped']),
        deliveryId: z.string().nullable(),
        statusCode: z.number().nullable(),
        error: z.string().nullable(),
        durationMs: z.number().nullable(),
      }),
      async handler({ principal, params }) {
        return alertChannels.testSend(actingUser(principal)!, params.orgId, params.channelId);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/alert-channels/recipients/confirm',
      summary: 'Confirm an e-mail channel recipient with the one-time token mailed to it (like /api/auth/verify-email)',
      tags: ['alert-channels'],
      auth: 'public',
      // The token is the credential: whoever holds the mail confirms, signed in or not.
      csrfExempt: true,
      body: z.object({ token: z.string().min(1).max(512) }).strict(),
      response: z.object({ channelId: z.string(), email: z.string(), confirmed: z.literal(true) }),
      async handler({ body }) {
        return alertChannels.confirmRecipient(body.token);
      },
    }),
  ];
}
