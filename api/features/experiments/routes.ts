import { z } from 'zod';
import { defineRoute, reply, KB, PRIVATE_NO_STORE, type AnyRoute } from '../../http/route';
import { actorFromPrincipal } from '../audit/writer';
import { idSchema, text } from '../projects/common';
import { ExperimentInputSchema, ExperimentRecordSchema } from './schema';
import type { BanditService } from './service';

/**
 * Bandit experiments (docs/experiments.md). Creating, rewarding,
 * reallocating and stopping need `flags:write` on the experiment's project (a read-tier personal
 * token or a read-only project token gets 403), reading needs `flags:read`; an experiment or
 * project the caller cannot see answers 404 like a missing one.
 */

/** Bodies here are small: a create is well under 1 KB, a reward a few dozen bytes. */
const SMALL_BODY = 16 * KB;

const ExperimentParams = z.object({ id: idSchema });
const ListQuery = z.object({
  projectId: idSchema.optional().describe('Default: every project the caller may read'),
  serviceId: idSchema.optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50),
});
// Postgres refuses NUL in text: such input is a 400 here, never a 500 from the driver.
const RewardBody = z.object({ variantName: z.string().min(1).pipe(text(100)), converted: z.boolean() }).strict();
const StopBody = z
  .object({ reason: z.string().trim().min(1).pipe(text(1_000)).default('stopped by hand') })
  .strict()
  .default({});


export function experimentRoutes(deps: { experiments: BanditService; projectOf: (id: string) => Promise<string | null> }): AnyRoute[] {
  const { experiments, projectOf } = deps;
  const tags = ['experiments'];
  const owned = (capability: 'flags:read' | 'flags:write') => ({ capability, owner: 'Experiment', projectOf: (ctx: { params: { id: string } }) => projectOf(ctx.params.id) });
  return [
    defineRoute({
      method: 'get',
      path: '/api/experiments/bandit',
      summary: "Bandit experiments of a project (and service), newest first; without projectId every project the caller may read",
      tags,
      response: z.object({ experiments: z.array(ExperimentRecordSchema) }),
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.query.projectId },
      query: ListQuery,
      async handler(ctx) {
        const list = await experiments.list(
          ctx.granted.map((g) => g.projectId),
          ctx.query.serviceId,
          ctx.query.limit,
        );
        return reply(200, { experiments: list }, PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/experiments/bandit',
      summary: "Start a bandit experiment on a flag's variants: equal allocations now, reallocation on its interval (409 when one is running on the flag)",
      tags,
      status: 201,
      response: ExperimentRecordSchema,
      auth: 'authenticated',
      access: { capability: 'flags:write', service: (ctx) => ctx.body.serviceId },
      body: ExperimentInputSchema,
      bodyLimit: SMALL_BODY,
      async handler(ctx) {
        const actor = actorFromPrincipal(ctx.principal, ctx);
        return reply(201, await experiments.create(actor, ctx.body), PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/experiments/:id/bandit-status',
      summary: 'The experiment: status, per-variant allocation, trials, successes, conversion rate, P(best), winner',
      tags,
      response: ExperimentRecordSchema,
      auth: 'authenticated',
      access: owned('flags:read'),
      params: ExperimentParams,
      async handler(ctx) {
        return reply(200, await experiments.get(ctx.params.id), PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/experiments/:id/reallocate',
      summary: 'Rebalance traffic by the posterior win probabilities now; at the confidence threshold with autoRolloutWinner the winner gets 100% and the experiment completes',
      tags,
      response: ExperimentRecordSchema,
      auth: 'authenticated',
      access: owned('flags:write'),
      params: ExperimentParams,
      bodyLimit: SMALL_BODY,
      async handler(ctx) {
        const actor = actorFromPrincipal(ctx.principal, ctx);
        return reply(200, await experiments.reallocate(actor, ctx.params.id), PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/experiments/:id/reward',
      summary: 'Count one trial of a variant, a success when converted (400 for an unknown variant, 409 once the experiment ended)',
      tags,
      response: ExperimentRecordSchema,
      auth: 'authenticated',
      access: owned('flags:write'),
      params: ExperimentParams,
      body: RewardBody,
      bodyLimit: SMALL_BODY,
      async handler(ctx) {
        return reply(200, await experiments.reward(ctx.params.id, ctx.body.variantName, ctx.body.converted), PRIVATE_NO_STORE);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/experiments/:id/stop',
      summary: 'Stop a running experiment: the flag keeps its current weights and no more reallocations run',
      tags,
      response: ExperimentRecordSchema,
      auth: 'authenticated',
      access: owned('flags:write'),
      params: ExperimentParams,
      body: StopBody,
      bodyLimit: SMALL_BODY,
      async handler(ctx) {
        const actor = actorFromPrincipal(ctx.principal, ctx);
        return reply(200, await experiments.stop(actor, ctx.params.id, ctx.body.reason), PRIVATE_NO_STORE);
      },
    }),
  ];
}
