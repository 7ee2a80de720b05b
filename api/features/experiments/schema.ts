import { z } from 'zod';
import { EventName } from '../analytics/ingest-common';
import { RESERVED_OUTCOMES } from '../analytics/queries/variants';
import { EnvironmentSchema } from '../../domain/environments';
import { flagKeySchema, idSchema, nameSchema } from '../projects/common';
import { REALLOCATION_INTERVAL } from '../../../workflows/messages';
import { BANDIT_ALGORITHMS } from './allocation';
import { EXPERIMENT_STATUSES } from './store';

/**
 * The shapes of a bandit experiment the API takes and answers, once (docs/experiments.md): the
 * routes validate and document them, the service takes its types from them with z.infer.
 */

/** What a create request gives, with its defaults; the service takes it as validated. */
export const ExperimentInputSchema = z
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

export type ExperimentInput = z.infer<typeof ExperimentInputSchema>;

const Counts = z.object({ trials: z.number(), successes: z.number() });
/** The record the API answers: the experiment's settings and state, and its variants' counts. */
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
      /** Set when the errors guardrail cut the arm to the floor: when, and the test's evidence. */
      cut: z.object({ at: z.string() }).passthrough().nullable(),
      /** Where the counts come from: the reward API and the outcome events (conversionEvent). */
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
export type ExperimentRecord = z.infer<typeof ExperimentRecordSchema>;
