import { z } from 'zod';
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
const MemberParams = z.object({ id: idSchema, memberId: idSchema.describe("The member's userId (CONTRACT 7)") });

/** Spec 4.7 members: members:view lists, members:manage changes, the owner role needs an owner. */
export function memberRoutes(deps: { members: MemberService }): AnyRoute[] {
  const { members } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/members',
      summary: "The project's members with their roles",
      tags: ['members'],
      auth: 'authenticated',
      params: ProjectParams,
      response: z.object({ members: z.array(MemberSchema) }),
      async handler({ principal, params }) {
        return { members: await members.list(principal, params.id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/members',
      summary: 'Add a user to the project (granting owner needs an owner)',
      tags: ['members'],
      auth: 'authenticated',
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
