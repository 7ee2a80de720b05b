import { z } from 'zod';
import type { Principal } from '../../auth/principal';
import { defineRoute, reply, type AnyRoute } from '../../http/route';
import { MemberSchema } from '../members/routes';
import { callerOf, idSchema } from '../projects/common';
import type { InvitationService } from './service';
import { INVITABLE_ROLES, INVITATION_STATUSES } from './types';

export const InvitationSchema = z.object({
  id: z.string(),
  projectId: z.string(),
  email: z.string(),
  role: z.enum(INVITABLE_ROLES),
  status: z.enum(INVITATION_STATUSES),
  invitedBy: z.string().nullable(),
  acceptedBy: z.string().nullable(),
  createdAt: z.string(),
  expiresAt: z.string(),
  settledAt: z.string().nullable(),
});

const ProjectParams = z.object({ id: idSchema });

const InvitationBody = z
  .object({
    email: z.string().trim().email().max(254),
    // Inviting as owner is refused; say so instead of a bare enum mismatch
    // (docs/api-reference.md#members-and-invitations).
    role: z.string().refine((r) => r !== 'owner', 'Inviting as owner is not allowed; invite as admin and transfer ownership after they join').pipe(z.enum(INVITABLE_ROLES)),
  })
  .strict();

/** Invitations and accepting them (docs/api-reference.md#members-and-invitations). */
export function invitationRoutes(deps: { invitations: InvitationService }): AnyRoute[] {
  const { invitations } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/invitations',
      summary: "The project's invitations (status pending, accepted, cancelled or expired)",
      tags: ['invitations'],
      auth: 'authenticated',
      access: { capability: 'members:view', project: (ctx) => ctx.params.id },
      params: ProjectParams,
      query: z.object({ status: z.enum(INVITATION_STATUSES).optional() }),
      response: z.object({ invitations: z.array(InvitationSchema) }),
      async handler({ params, query }) {
        return { invitations: await invitations.list(params.id, query.status) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/invitations',
      summary: 'Invite someone by e-mail as admin, member or viewer; expires after 7 days',
      tags: ['invitations'],
      auth: 'authenticated',
      // No token invites to a role beyond what it holds (InvitationService).
      access: { capability: 'members:manage', project: (ctx) => ctx.params.id },
      noPersonalTokens: true,
      status: 201,
      params: ProjectParams,
      body: InvitationBody,
      response: InvitationSchema,
      async handler(ctx) {
        return invitations.create(callerOf(ctx), ctx.params.id, ctx.body);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/:id/invitations/:invitationId',
      summary: 'Cancel a pending invitation',
      tags: ['invitations'],
      auth: 'authenticated',
      access: { capability: 'members:manage', project: (ctx) => ctx.params.id },
      status: 204,
      params: z.object({ id: idSchema, invitationId: idSchema }),
      async handler(ctx) {
        await invitations.cancel(callerOf(ctx), ctx.params.id, ctx.params.invitationId);
        return reply(204);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/invitations/:token/accept',
      summary: "Accept an invitation (dashboard session whose verified e-mail is the invited address); returns the membership",
      tags: ['invitations'],
      auth: 'session',
      noPersonalTokens: true,
      params: z.object({ token: z.string().min(1).max(256) }),
      response: z.object({
        membership: MemberSchema,
        project: z.object({ id: z.string(), orgId: z.string(), name: z.string(), slug: z.string() }),
      }),
      async handler(ctx) {
        const principal = ctx.principal as Extract<Principal, { type: 'session' }>;
        return invitations.accept(callerOf(ctx), principal.user, ctx.params.token);
      },
    }),
  ];
}
