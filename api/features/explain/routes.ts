import { z } from 'zod';
import { BODY_LIMITS, defineRoute, type AnyRoute } from '../../http/route';
import { ContextSchema, contextOf } from '../evaluation/schemas';
import { EnvironmentSchema } from '../../domain/environments';
import { FlagKeyParams, idSchema } from '../projects/common';
import type { ExplainService } from './service';


const ConditionSchema = z.object({
  property: z.string(),
  operator: z.string(),
  expected: z.unknown(),
  actual: z.unknown().describe('The context value evaluation read for the property; absent when the context has none'),
  passed: z.boolean(),
});

const RuleSchema = z.object({
  id: z.string(),
  matched: z.boolean(),
  conditions: z.array(ConditionSchema).describe('Every condition of the rule, each with its own outcome'),
  rollout: z
    .object({
      percentage: z.number(),
      bucket: z.number().nullable().describe('The targeting key bucket on the 0..100 scale; null without a targeting key'),
      included: z.boolean().describe('bucket < percentage'),
    })
    .optional()
    .describe('Present when the conditions held and the rule rolls out to less than 100%'),
  issue: z.string().optional().describe('Why a stored rule that cannot be compiled never matches'),
});

export const ExplanationSchema = z.object({
  flagKey: z.string(),
  value: z.unknown(),
  reason: z.enum(['TARGETING_MATCH', 'DEFAULT', 'VARIANT', 'ERROR']),
  variant: z.string().optional(),
  ruleId: z.string().optional(),
  bucket: z.number().optional().describe('The bucket that decided (0..100): the variant bucket for VARIANT, else the rollout bucket of a matched partial rule'),
  errorCode: z.string().optional(),
  errorMessage: z.string().optional(),
  disabled: z.boolean().optional(),
  rules: z.array(RuleSchema).describe('The rules evaluation reached, in order: those that did not match, then the one that did'),
});

/**
 * Explain (docs/explain.md): a read-only POST, so read-tier personal tokens may call it
 * (docs/api-reference.md#personal-access-tokens).
 */
export function explainRoutes(deps: { explain: ExplainService }): AnyRoute[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/flags/:key/explain',
      summary: 'Explain how the current flag evaluates for a context: each rule reached, each condition with the actual value, rollout and variant buckets',
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.body.serviceId },
      readOnly: true,
      bodyLimit: BODY_LIMITS.evaluation,
      params: FlagKeyParams,
      body: z
        .object({
          serviceId: idSchema,
          environment: EnvironmentSchema.default('development').describe('Defaults to development, like the other per-flag routes'),
          context: ContextSchema.optional(),
        })
        .strict(),
      response: ExplanationSchema,
      async handler({ params, body }) {
        return deps.explain.explain(body.serviceId, body.environment, params.key, contextOf(body.context));
      },
    }),
  ];
}
