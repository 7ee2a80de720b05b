import { STATUS_CODES } from 'node:http';
import { z } from 'zod';
import type { Principal } from '../../auth/principal';
import { badRequest, tooManyRequests, unauthorized } from '../../http/errors';
import { BODY_LIMITS, checkCsrf, defineRoute, reply, type AnyRoute, type RequestContext } from '../../http/route';
import { actorFromPrincipal, type AuditActor } from '../audit/writer';
import {
  BULK_DEMO_MAX_ITEMS,
  BULK_MAX_ITEMS,
  BulkOutcomeSchema,
  bulkStatus,
  serviceIdOf,
  summarize,
  type BulkFlagOperations,
  type BulkItemResult,
} from './bulk';

/** What bulk routes need to know about demo services (docs/api-reference.md#demo-service). */
export interface BulkDemoPolicy {
  isDemoService(serviceId: string): boolean;
  /** One demo write per IP per interval, across replicas. */
  throttle: { intervalSeconds: number; tryAcquire(ip: string): Promise<boolean> };
}

export interface BulkRouteDeps {
  bulk: BulkFlagOperations;
  demo: BulkDemoPolicy;
}

/** Audit actor of unauthenticated demo writes (docs/api-reference.md#audit-log). */
export const PUBLIC_DEMO_ACTOR = 'public-demo';

const BulkBody = z
  .object({
    flags: z
      .array(z.unknown())
      .min(1)
      .max(BULK_DEMO_MAX_ITEMS)
      .describe(`Items (see the route summary); at most ${BULK_MAX_ITEMS}, or ${BULK_DEMO_MAX_ITEMS} when every item is on a demo service. Each item is validated on its own and fails alone.`),
  })
  .strict();

const BulkQuery = z.object({
  summary: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .describe('true: answer only success, total, succeeded and failed'),
});

const BulkResponse = BulkOutcomeSchema.extend({
  results: BulkOutcomeSchema.shape.results.optional().describe('Absent with ?summary=true'),
  error: z.string().optional().describe('Only when every item failed (the status is theirs, or 400)'),
  message: z.string().optional(),
});

type BulkContext = RequestContext<unknown, z.infer<typeof BulkQuery>, z.infer<typeof BulkBody>>;

const STATUS_NOTE =
  '201 (create) / 200 when every item succeeded, 207 when results are mixed; when every item failed, the status they share (e.g. 403, 404, 409) or 400, with the same body plus error and message.';

/**
 * The bulk endpoints (docs/api-reference.md#flags) and the demo write rules
 * (docs/api-reference.md#demo-service). Mounted before the
 * /api/flags/:key routes (fixed segments win anyway, see mountRoutes).
 */
export function bulkFlagRoutes(deps: BulkRouteDeps): AnyRoute[] {
  const { bulk, demo } = deps;
  const everyItemOnDemo = (items: unknown[]) =>
    items.every((item) => {
      const serviceId = serviceIdOf(item);
      return serviceId !== undefined && demo.isDemoService(serviceId);
    });
  const actorOf = (ctx: BulkContext): AuditActor => actorFromPrincipal(ctx.principal, ctx);

  function requireItemLimit(items: unknown[]) {
    if (items.length > BULK_MAX_ITEMS && !everyItemOnDemo(items)) {
      throw badRequest(
        `Validation failed: body.flags: at most ${BULK_MAX_ITEMS} items per request (${BULK_DEMO_MAX_ITEMS} when every item is on a demo service); got ${items.length}`,
        [{ path: 'body.flags', message: `at most ${BULK_MAX_ITEMS} items` }],
      );
    }
  }

  function respond(results: BulkItemResult[], allSucceeded: number, summaryOnly: boolean) {
    const outcome = summarize(results);
    const status = bulkStatus(results, allSucceeded);
    const body: Record<string, unknown> = summaryOnly
      ? { success: outcome.success, total: outcome.total, succeeded: outcome.succeeded, failed: outcome.failed }
      : { ...outcome };
    // An error status always carries the envelope, even in summary form.
    if (outcome.succeeded === 0 && outcome.failed > 0) {
      Object.assign(body, { error: STATUS_CODES[status] ?? 'Error', message: `All ${outcome.failed} items failed` });
    }
    return reply(status, body);
  }

  return [
    defineRoute({
      method: 'post',
      path: '/api/flags/bulk',
      summary: `Create flags in bulk; items are POST /api/flags bodies. ${STATUS_NOTE}`,
      tags: ['flags'],
      auth: 'authenticated',
      // Each item needs flags:write on its service's project (BulkFlagOperations).
      access: { capability: 'flags:write', per: 'item' },
      status: 201,
      bodyLimit: BODY_LIMITS.bulk,
      query: BulkQuery,
      body: BulkBody,
      response: BulkResponse,
      async handler(ctx) {
        requireItemLimit(ctx.body.flags);
        const results = await bulk.create(ctx.principal, actorOf(ctx), ctx.body.flags);
        return respond(results, 201, ctx.query.summary);
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/flags/bulk',
      summary:
        'Update flags in bulk; items are {key, serviceId, environment, updates}. When every item is on a demo service the request needs no ' +
        `credential or CSRF token, applies only updates.enabled, takes up to ${BULK_DEMO_MAX_ITEMS} items (at most 1 MB of body without a credential), is limited to one per IP every 2 s ` +
        `(429) and is recorded as ${PUBLIC_DEMO_ACTOR}; otherwise normal authentication, CSRF and write permission apply to the whole request. ${STATUS_NOTE}`,
      tags: ['flags'],
      // Decided per request below: demo-only requests are open, anything else needs a credential and CSRF.
      auth: 'public',
      // Demo-only requests are open; otherwise each item needs flags:write on its service's project.
      access: { capability: 'flags:write', per: 'item' },
      csrfExempt: true,
      bodyLimit: BODY_LIMITS.bulk,
      anonymousBodyLimit: BODY_LIMITS.anonymousBulk,
      query: BulkQuery,
      body: BulkBody,
      response: BulkResponse,
      async handler(ctx) {
        const items = ctx.body.flags;
        if (everyItemOnDemo(items)) {
          const plan = bulk.planDemoWrite(items);
          if (plan.groups.length && !(await demo.throttle.tryAcquire(ctx.ip))) {
            ctx.res.setHeader('Retry-After', String(demo.throttle.intervalSeconds));
            throw tooManyRequests(`Demo writes are limited to one per IP address every ${demo.throttle.intervalSeconds} seconds`);
          }
          const actor: AuditActor = { name: PUBLIC_DEMO_ACTOR, userId: null, ipAddress: ctx.ip, userAgent: ctx.userAgent };
          return respond(await bulk.applyDemoWrite(actor, plan), 200, ctx.query.summary);
        }
        requireCredential(ctx.principal, ctx.req.method, ctx.req.get('x-csrf-token'));
        requireItemLimit(items);
        return respond(await bulk.update(ctx.principal, actorOf(ctx), items), 200, ctx.query.summary);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/flags/bulk',
      summary: `Delete flags in bulk; items are {key, serviceId, environment, version?}. ${STATUS_NOTE}`,
      tags: ['flags'],
      auth: 'authenticated',
      // Each item needs flags:delete on its service's project (BulkFlagOperations).
      access: { capability: 'flags:delete', per: 'item' },
      bodyLimit: BODY_LIMITS.bulk,
      query: BulkQuery,
      body: BulkBody,
      response: BulkResponse,
      async handler(ctx) {
        requireItemLimit(ctx.body.flags);
        const results = await bulk.remove(ctx.principal, actorOf(ctx), ctx.body.flags);
        return respond(results, 200, ctx.query.summary);
      },
    }),
  ];
}

/**
 * A request that is not demo-only gets the checks an authenticated route gets
 * (docs/api-reference.md#demo-service).
 */
function requireCredential(principal: Principal, method: string, csrfHeader: string | undefined) {
  if (principal.type === 'anonymous') throw unauthorized();
  checkCsrf(principal, method, csrfHeader);
}
