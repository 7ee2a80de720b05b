import { z } from 'zod';
import type { AccessRule, ProjectAccess } from '../../auth/access';
import type { Principal } from '../../auth/principal';
import { EnvironmentSchema } from '../../domain/environments';
import { notFound, unauthorized, validationFailed } from '../../http/errors';
import { BODY_LIMITS, defineRoute, type AnyRoute, type Reply, type RequestContext, type HANDLED } from '../../http/route';
import { actorFromPrincipal } from '../audit/writer';
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT, pageBody, pageRequest, PROJECTABLE_FIELDS, type FlagListOverride } from './list-paging';
import { FlagCreateSchema, FlagPatchSchema, FlagResponseSchema, FlagToggleSchema, FlagTypeSchema, NamedFlagVersionSchema } from './schema';
import type { FlagService } from './service';

export interface FlagRouteDeps {
  flags: FlagService;
  access: ProjectAccess;
  /**
   * Answers lists of a public demo service (docs/api-reference.md#demo-service); undefined = not a
   * demo list.
   */
  demoList?: FlagListOverride;
}

const PROJECTABLE = new Set<string>(PROJECTABLE_FIELDS);

const KeyParams = z.object({ key: z.string().min(1).max(256) });
const RefQuery = z.object({
  serviceId: z.string().min(1).max(200),
  environment: EnvironmentSchema.default('development').describe('Defaults to development'),
});
const Version = z.coerce.number().int().positive();

const ListQuery = z.object({
  projectId: z.string().min(1).max(200).optional().describe('Required, except when serviceId is a public demo service'),
  serviceId: z.string().min(1).max(200).optional(),
  environment: EnvironmentSchema.optional(),
  search: z.string().max(200).optional().describe('Case-insensitive substring of key or name'),
  tags: z
    .string()
    .max(2000)
    .optional()
    .transform((s) => (s ? s.split(',').map((t) => t.trim()).filter(Boolean) : undefined))
    .describe('Comma-separated; matches flags having any of them'),
  enabled: z
    .enum(['true', 'false'])
    .optional()
    .transform((v) => (v === undefined ? undefined : v === 'true')),
  type: FlagTypeSchema.optional(),
  limit: z.coerce.number().int().min(1).optional().describe(`Default ${LIST_DEFAULT_LIMIT}; values above ${LIST_MAX_LIMIT} are capped`),
  offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
  cursor: z.string().max(1000).optional().describe('nextCursor or prevCursor of an earlier page'),
  cursor_direction: z.enum(['next', 'prev']).default('next'),
  fields: z
    .string()
    .max(1000)
    .optional()
    .transform((s, ctx) => {
      if (s === undefined) return undefined;
      const fields = [...new Set(s.split(',').map((f) => f.trim()).filter(Boolean))];
      const unknown = fields.filter((f) => !PROJECTABLE.has(f));
      if (unknown.length) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: `unknown field(s) ${unknown.join(', ')}; allowed: ${PROJECTABLE_FIELDS.join(', ')}` });
        return z.NEVER;
      }
      if (!fields.length) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'name at least one field' });
        return z.NEVER;
      }
      return fields;
    })
    .describe('Comma-separated projection'),
});

const HistoryQuery = RefQuery.extend({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  offset: z.coerce.number().int().min(0).default(0),
});


/**
 * Flag management (docs/api-reference.md#flags). Every route declares its capability on the owning
 * project (`access`), checked before its handler.
 */
export function flagRoutes(deps: FlagRouteDeps): AnyRoute[] {
  const { flags, access } = deps;

  /**
   * The list of a public demo service is open to anyone (docs/api-reference.md#demo-service;
   * demoList answers it, the page reaches the handler through demoPages); any other list needs
   * flags:read on ?projectId.
   */
  const demoPages = new WeakMap<object, Reply | typeof HANDLED>();
  const listAccess: AccessRule<RequestContext<unknown, z.infer<typeof ListQuery>, unknown>> = {
    capability: 'flags:read',
    async check(principal, ctx) {
      const demoPage = await deps.demoList?.(ctx);
      if (demoPage !== undefined) {
        demoPages.set(ctx, demoPage);
        return [];
      }
      if (principal.type === 'anonymous') throw unauthorized();
      if (!ctx.query.projectId) throw validationFailed([{ path: 'query.projectId', message: 'Required' }]);
      return [await access.require(principal, ctx.query.projectId, 'flags:read')];
    },
  };

  const client = (ctx: { principal: Principal; ip: string; userAgent: string }) =>
    actorFromPrincipal(ctx.principal, ctx);

  return [
    defineRoute({
      method: 'get',
      path: '/api/flags',
      summary: 'List flags of a project (filters, offset or cursor paging, field projection; demo services: no auth, 4,096 per page, ETag)',
      tags: ['flags'],
      auth: 'public',
      access: listAccess,
      query: ListQuery,
      reads: 'replica',
      response: z.object({
        flags: z.array(FlagResponseSchema.partial()),
        total: z.number().int(),
        limit: z.number().int(),
        offset: z.number().int(),
        hasMore: z.boolean(),
        nextCursor: z.string().nullable(),
        prevCursor: z.string().nullable(),
      }),
      async handler(ctx) {
        const demoPage = demoPages.get(ctx);
        if (demoPage !== undefined) return demoPage;
        const { query } = ctx;
        const projectId = ctx.granted[0].projectId;
        const request = pageRequest(query, Math.min(query.limit ?? LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT));
        const page = await flags.list(
          {
            projectId,
            serviceId: query.serviceId,
            environment: query.environment,
            search: query.search,
            tags: query.tags,
            enabled: query.enabled,
            type: query.type,
          },
          request,
          ctx.reader,
        );
        return pageBody({ ...page, flags: await flags.respond(page.flags) }, request, query.fields);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/flags',
      summary: 'Create a flag (in every environment when none is given; returns the requested or development copy)',
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.body.serviceId },
      status: 201,
      bodyLimit: BODY_LIMITS.flagWrite,
      body: FlagCreateSchema,
      response: FlagResponseSchema,
      async handler(ctx) {
        const { body } = ctx;
        const created = await flags.create(client(ctx), body);
        const [answered] = await flags.respond([created.find((f) => f.environment === (body.environment ?? 'development')) ?? created[0]]);
        return answered;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/flags/:key',
      summary: 'Read one flag',
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      params: KeyParams,
      query: RefQuery,
      response: FlagResponseSchema,
      async handler({ params, query }) {
        const flag = await flags.get({ key: params.key, ...query });
        if (!flag) throw notFound(`Flag "${params.key}"`);
        const [answered] = await flags.respond([flag]);
        return answered;
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/flags/:key',
      summary: 'Change the given fields of a flag (optional `version` for optimistic concurrency)',
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.query.serviceId },
      bodyLimit: BODY_LIMITS.flagWrite,
      params: KeyParams,
      query: RefQuery,
      body: FlagPatchSchema,
      response: FlagResponseSchema,
      async handler(ctx) {
        const { params, query, body } = ctx;
        const { version, ...patch } = body;
        const [answered] = await flags.respond([await flags.update(client(ctx), { key: params.key, ...query }, patch, version)]);
        return answered;
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/flags/:key',
      summary: 'Delete a flag (optional `version` query for optimistic concurrency)',
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:delete', service: (ctx) => ctx.query.serviceId },
      params: KeyParams,
      query: RefQuery.extend({ version: Version.optional() }),
      async handler(ctx) {
        const { params, query } = ctx;
        await flags.remove(client(ctx), { key: params.key, serviceId: query.serviceId, environment: query.environment }, query.version);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/toggle',
      summary: 'Flip a flag, or set `enabled` when given',
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.query.serviceId },
      bodyLimit: BODY_LIMITS.flagWrite,
      params: KeyParams,
      query: RefQuery,
      body: FlagToggleSchema.optional(),
      response: FlagResponseSchema,
      async handler(ctx) {
        const { params, query, body } = ctx;
        const opts = body?.reason ? { metadata: { reason: body.reason } } : {};
        const [answered] = await flags.respond([await flags.toggle(client(ctx), { key: params.key, ...query }, body?.enabled, body?.version, opts)]);
        return answered;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/flags/:key/history',
      summary: 'Version history of a flag, newest first',
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      params: KeyParams,
      query: HistoryQuery,
      reads: 'replica',
      response: z.object({ versions: z.array(NamedFlagVersionSchema), total: z.number().int(), hasMore: z.boolean() }),
      async handler({ params, query, reader }) {
        const { versions, total } = await flags.history(
          { key: params.key, serviceId: query.serviceId, environment: query.environment },
          query.limit,
          query.offset,
          reader,
        );
        return { versions, total, hasMore: query.offset + versions.length < total };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/rollback/:version',
      summary: "Restore a version's content as a new version",
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.query.serviceId },
      params: KeyParams.extend({ version: Version }),
      query: RefQuery,
      response: FlagResponseSchema,
      async handler(ctx) {
        const { params, query } = ctx;
        const [answered] = await flags.respond([await flags.rollback(client(ctx), { key: params.key, ...query }, params.version)]);
        return answered;
      },
    }),
  ];
}
