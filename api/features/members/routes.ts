import { z } from 'zod';
import { actingUser } from '../../auth/principal';
import { defineRoute, reply, type AnyRoute } from '../../http/route';
import { callerOf, idSchema } from '../projects/common';
import type { MemberService } from './service';
import { PROJECT_ROLES } from './types';

export const MemberSchema = z.object({
  projectId: z.string(),
  userId: z.string(),
  email: z.string(),
  name: z.string(),
  role: z.enum(PROJECT_ROLES),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const ProjectParams = z.object({ id: idSchema });
const MemberParams = z.object({ id: idSchema, memberId: idSchema.describe("The member's userId") });

/**
 * Members (docs/api-reference.md#members-and-invitations): members:view lists, members:manage
 * changes, the owner role needs an owner.
 */
export function memberRoutes(deps: { members: MemberService }): AnyRoute[] {
  const { members } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/members',
      summary: "The project's members with their roles",
      tags: ['members'],
      auth: 'authenticated',
      access: { capability: 'members:view', project: (ctx) => ctx.params.id },
      params: ProjectParams,
      response: z.object({ members: z.array(MemberSchema) }),
      async handler({ params }) {
        return { members: await members.list(params.id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/members',
      summary: 'Add a user to the project (granting owner needs an owner)',
      tags: ['members'],
      auth: 'authenticated',
      // Granting owner also needs members:owner; no token grants a role beyond what it holds (MemberService).
      access: { capability: 'members:manage', project: (ctx) => ctx.params.id },
      adminTier: true,
      status: 201,
      params: ProjectParams,
      body: z.object({ userId: idSchema, role: z.enum(PROJECT_ROLES) }).strict(),
      response: MemberSchema,
      async handler(ctx) {
        return members.add(callerOf(ctx), ctx.params.id, ctx.body);
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/projects/:id/members/:memberId',
      summary: "Change a member's role (owner changes need an owner; the last owner cannot be demoted)",
      tags: ['members'],
      auth: 'authenticated',
      // Changes to or from owner also need members:owner (MemberService).
      access: { capability: 'members:manage', project: (ctx) => ctx.params.id },
      adminTier: true,
      params: MemberParams,
      body: z.object({ role: z.enum(PROJECT_ROLES) }).strict(),
      response: MemberSchema,
      async handler(ctx) {
        return members.changeRole(callerOf(ctx), ctx.params.id, ctx.params.memberId, ctx.body.role);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/:id/members/:memberId',
      summary: 'Remove a member (anyone may leave; the last owner cannot be removed)',
      tags: ['members'],
      auth: 'authenticated',
      // Leaving needs only members:view; removing an owner also needs members:owner (MemberService).
      access: {
        capability: (ctx) => (actingUser(ctx.principal)?.id === ctx.params.memberId ? 'members:view' : 'members:manage'),
        project: (ctx) => ctx.params.id,
      },
      adminTier: true,
      status: 204,
      params: MemberParams,
      async handler(ctx) {
        await members.remove(callerOf(ctx), ctx.params.id, ctx.params.memberId);
        return reply(204);
      },
    }),
  ];
}
