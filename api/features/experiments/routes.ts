import { z } from 'zod';
import { defineRoute, reply, KB, PRIVATE_NO_STORE, type AnyRoute } from '../../http/route';
import { actorFromPrincipal } from '../audit/writer';
import { EventName } from '../analytics/ingest-common';
import { RESERVED_OUTCOMES } from '../analytics/queries/variants';
import { EnvironmentSchema } from '../../domain/environments';
import { flagKeySchema, idSchema, nameSchema, text } from '../projects/common';
import { BANDIT_ALGORITHMS } from './allocation';
import { REALLOCATION_INTERVAL } from '../../../workflows/messages';
import { EXPERIMENT_STATUSES } from './store';
import type { BanditService } from './service';

/**
 * Bandit experiments (docs/experiments.md). Creating, rewarding,
 * reallocating and stopping need `flags:write` on the experiment's project (a read-tier personal
 * token or a read-only project token gets 403), reading needs `flags:read`; an experiment or
 * project the caller cannot see answers 404 like a missing one.
 */

/** Bodies here are small: a create is well under 1 KB, a reward a few dozen bytes. */
const SMALL_BODY = 16 * KB;

const CreateBody = z
  .object({
    name: nameSchema,
    projectId: idSchema,
    serviceId: idSchema,
    flagKey: flagKeySchema,
    environment: EnvironmentSchema.default('production').describe('Default production'),
    algorithm: z.enum(BANDIT_ALGORITHMS).default('thompson_sampling'),
    minExplorationFloor: z.number().finite().min(0).max(1).default(0.05).describe('Share every variant keeps; times the number of variants at most 1'),
    minSampleSizePerVariant: z.number().int().min(0).max(1_000_000_000).default(100).describe('Trials every variant needs before allocations move'),
    confidenceThreshold: z.number().finite().min(0).max(1).default(0.95).describe('P(best) that declares the winner'),
    autoRolloutWinner: z.boolean().default(false).describe('Promote the winner to 100% and complete the experiment'),
    conversionEvent: EventName.refine((name) => !(RESERVED_OUTCOMES as readonly string[]).includes(name), 'error and latency are not conversions')
      .optional()
      .describe('Outcome event (docs/api-reference.md#outcome-events) counted as a conversion, read from the warehouse at every reallocation'),
    reallocationIntervalMinutes: z
      .number()
      .finite()
      .min(REALLOCATION_INTERVAL.min)
      .max(REALLOCATION_INTERVAL.max)
      .default(REALLOCATION_INTERVAL.default)
      .describe('Minutes between scheduled reallocations (1 to 10,080; default 15)'),
    seed: z.number().int().min(0).max(2 ** 31 - 1).optional().describe('Seed of the reallocation draws (reproducible runs); random by default'),
  })
  .strict();

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

const Counts = z.object({ trials: z.number(), successes: z.number() });
export const ExperimentRecordSchema = z.object({
  id: z.string(),
  name: z.string(),
  projectId: z.string(),
  serviceId: z.string(),
  flagKey: z.string(),
  environment: z.string(),
  algorithm: z.enum(BANDIT_ALGORITHMS),
  status: z.enum(EXPERIMENT_STATUSES),
  statusReason: z.string().nullable(),
  variants: z.array(
    z.object({
      name: z.string(),
      allocation: z.number(),
      trials: z.number(),
      successes: z.number(),
      conversionRate: z.number(),
      probabilityBest: z.number(),
      cut: z.object({ at: z.string() }).passthrough().nullable(),
      sources: z.object({ rewards: Counts, events: Counts }),
    }),
  ),
  winner: z.string().nullable(),
  minExplorationFloor: z.number(),
  minSampleSizePerVariant: z.number(),
  confidenceThreshold: z.number(),
  autoRolloutWinner: z.boolean(),
  conversionEvent: z.string().nullable(),
  reallocationIntervalMinutes: z.number(),
  seed: z.number(),
  rounds: z.number(),
  lastReallocatedAt: z.string().nullable(),
  startedAt: z.string(),
  endedAt: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

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
      body: CreateBody,
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
