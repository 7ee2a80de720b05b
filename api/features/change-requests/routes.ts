import { z } from 'zod';
import { BODY_LIMITS, defineRoute, type AnyRoute, type RequestContext } from '../../http/route';
import { callerOf, idSchema, limitSchema, offsetSchema } from '../projects/common';
import { ChangePolicySchema, ChangeRequestCreateSchema, ChangeRequestPatchSchema, ChangeRequestSchema, CHANGE_REQUEST_STATUSES } from './schema';
import type { ChangeRequestService, RequestCaller } from './service';

const ProjectParams = z.object({ id: idSchema });
const RequestParams = ProjectParams.extend({ requestId: idSchema });
const project = (ctx: { params: { id: string } }) => ctx.params.id;
const caller = (ctx: RequestContext<unknown, unknown, unknown>): RequestCaller => ({ ...callerOf(ctx), grant: ctx.granted[0] });
const comment = z.string().trim().min(1).max(2_000);

/**
 * Change policy and change requests (docs/change-requests.md). Opening and applying a request
 * needs flags rights on the project; reviewing is for people (`auth: 'user'`: never a project
 * token) whose role the policy names, which the service checks against the request.
 */
export function changeRequestRoutes(deps: { requests: ChangeRequestService }): AnyRoute[] {
  const { requests } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/change-policy',
      summary: "The project's change policy: which environments need approval, by whom",
      tags: ['change-requests'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project },
      params: ProjectParams,
      response: ChangePolicySchema,
      handler: ({ params }) => requests.getPolicy(params.id),
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/:id/change-policy',
      summary: "Replace the project's change policy (owner or admin)",
      tags: ['change-requests'],
      auth: 'user',
      access: { capability: 'settings:manage', project },
      params: ProjectParams,
      body: ChangePolicySchema,
      response: ChangePolicySchema,
      handler: (ctx) => requests.putPolicy(callerOf(ctx), ctx.params.id, ctx.body),
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/change-requests',
      summary: 'Open a change request: up to 1,000 flag changes reviewed and applied as one',
      tags: ['change-requests'],
      auth: 'authenticated',
      access: { capability: 'flags:write', project },
      status: 201,
      bodyLimit: BODY_LIMITS.bulk,
      params: ProjectParams,
      body: ChangeRequestCreateSchema,
      response: ChangeRequestSchema,
      handler: (ctx) => requests.create(caller(ctx), ctx.body),
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/change-requests',
      summary: "The project's change requests, newest first",
      tags: ['change-requests'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project },
      params: ProjectParams,
      query: z.object({ status: z.enum(CHANGE_REQUEST_STATUSES).optional(), limit: limitSchema, offset: offsetSchema }),
      response: z.object({ changeRequests: z.array(ChangeRequestSchema), total: z.number().int() }),
      handler: (ctx) => requests.list(caller(ctx), ctx.query.status, ctx.query.limit, ctx.query.offset),
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/change-requests/:requestId',
      summary: 'One change request, with the flags that moved since it was made',
      tags: ['change-requests'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project },
      params: RequestParams,
      response: ChangeRequestSchema,
      handler: (ctx) => requests.get(caller(ctx), ctx.params.requestId),
    }),
    defineRoute({
      method: 'patch',
      path: '/api/projects/:id/change-requests/:requestId',
      summary: 'Edit an open change request (its author); every approval is void',
      tags: ['change-requests'],
      auth: 'user',
      access: { capability: 'flags:write', project },
      bodyLimit: BODY_LIMITS.bulk,
      params: RequestParams,
      body: ChangeRequestPatchSchema,
      response: ChangeRequestSchema,
      handler: (ctx) => requests.update(caller(ctx), ctx.params.requestId, ctx.body),
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/change-requests/:requestId/approve',
      summary: 'Approve a pending change request (people whose role the policy names; not the author unless allowed)',
      tags: ['change-requests'],
      auth: 'user',
      access: { capability: 'flags:read', project },
      params: RequestParams,
      body: z.object({ comment: comment.optional() }).strict().optional(),
      response: ChangeRequestSchema,
      handler: (ctx) => requests.approve(caller(ctx), ctx.params.requestId, ctx.body?.comment),
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/change-requests/:requestId/reject',
      summary: 'Reject an open change request, with a comment; it can never apply',
      tags: ['change-requests'],
      auth: 'user',
      access: { capability: 'flags:read', project },
      params: RequestParams,
      body: z.object({ comment }).strict(),
      response: ChangeRequestSchema,
      handler: (ctx) => requests.reject(caller(ctx), ctx.params.requestId, ctx.body.comment),
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/change-requests/:requestId/cancel',
      summary: 'Cancel an open change request (its author, an owner or an admin)',
      tags: ['change-requests'],
      auth: 'user',
      access: { capability: 'flags:write', project },
      params: RequestParams,
      response: ChangeRequestSchema,
      handler: (ctx) => requests.cancel(caller(ctx), ctx.params.requestId),
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/change-requests/:requestId/apply',
      summary: 'Apply an approved change request now, atomically; 409 CONFLICT (and the request failed) when a flag moved past its base version',
      tags: ['change-requests'],
      auth: 'authenticated',
      access: { capability: 'flags:write', project },
      params: RequestParams,
      response: ChangeRequestSchema,
      handler: (ctx) => requests.apply(caller(ctx), ctx.params.requestId),
    }),
  ];
}
