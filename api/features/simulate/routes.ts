import { z } from 'zod';
import { BODY_LIMITS, defineRoute, type AnyRoute } from '../../http/route';
import { EnvironmentSchema } from '../../domain/environments';
import { FlagContentPatchSchema } from '../flags/schema';
import { FlagKeyParams, idSchema } from '../projects/common';
import { DEFAULT_COHORT_SIZE, MAX_COHORT_SIZE, MAX_EXAMPLES, OUTCOME_KINDS, type SimulateService } from './service';

const CandidateFlagSchema = z
  .object({
    enabled: FlagContentPatchSchema.shape.enabled,
    defaultValue: z.unknown().optional().describe("Of the flag's type"),
    variants: FlagContentPatchSchema.shape.variants,
    targeting: FlagContentPatchSchema.shape.targeting.describe('Replaces every rule; a rule without an id is named $new:<index> in byRule'),
  })
  .strict()
  .describe("The fields evaluation reads, each replacing the current flag's; validated as a flag update");

export const SimulationSchema = z.object({
  flagKey: z.string(),
  cohortSize: z.number().describe('The size asked for'),
  evaluated: z.number().describe('Distinct recent targeting keys found and evaluated (at most cohortSize)'),
  changed: z.number().describe('Contexts whose value differs under the candidate'),
  unchanged: z.number(),
  transitions: z.array(z.object({ from: z.unknown(), to: z.unknown(), count: z.number() })).describe('Value changes, most frequent first'),
  byRule: z
    .array(
      z.object({
        ruleId: z.string().describe('A rule id, or $variant:<name>, $default, $disabled, $error for what served without a rule'),
        outcome: z.enum(OUTCOME_KINDS),
        before: z.number(),
        after: z.number(),
      }),
    )
    .describe('Contexts each rule or other outcome served, current flag and candidate; every rule and variant of either is listed'),
  examples: z
    .array(z.object({ targetingKey: z.string(), before: z.unknown(), after: z.unknown(), beforeRuleId: z.string(), afterRuleId: z.string() }))
    .describe(`Up to ${MAX_EXAMPLES} changed contexts, most recently seen first`),
  sources: z.object({ ring: z.number(), warehouse: z.number() }).describe("Contexts from this instance's context ring and from the recent-contexts warehouse"),
});

/**
 * Simulate (docs/simulate.md): a read-only POST, so read-tier personal tokens may call it
 * (docs/api-reference.md#personal-access-tokens); project API tokens may not.
 */
export function simulateRoutes(deps: { simulate: SimulateService }): AnyRoute[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/simulate',
      summary: 'Replay recent real contexts through the current flag and a candidate: how many would change value, from what to what, by rule, with examples; nothing is written',
      tags: ['flags'],
      // Users only (sessions, personal tokens), as the context browser: the answer names real
      // targeting keys, and a project read token ships in browser bundles.
      auth: 'user',
      access: { capability: 'flags:read', service: (ctx) => ctx.body.serviceId },
      readOnly: true,
      bodyLimit: BODY_LIMITS.flagWrite,
      params: FlagKeyParams,
      body: z
        .object({
          serviceId: idSchema,
          environment: EnvironmentSchema.default('development').describe('Defaults to development, like the other per-flag routes'),
          cohortSize: z.number().int().min(1).max(MAX_COHORT_SIZE).default(DEFAULT_COHORT_SIZE).describe('Distinct recent targeting keys to replay'),
          candidateFlag: CandidateFlagSchema,
        })
        .strict(),
      response: SimulationSchema,
      async handler({ params, body }) {
        return deps.simulate.simulate({
          serviceId: body.serviceId,
          environment: body.environment,
          flagKey: params.key,
          cohortSize: body.cohortSize,
          candidate: body.candidateFlag,
        });
      },
    }),
  ];
}
