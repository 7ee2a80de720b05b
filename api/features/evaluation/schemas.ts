import { z, type ZodTypeAny } from 'zod';
import { validationFailed, type HttpError } from '../../http/errors';
import { ENVIRONMENTS, EnvironmentSchema } from '../../domain/environments';
import type { EvaluationContext } from './engine/index';

/**
 * Evaluation context (docs/evaluation.md#context): an object with `targetingKey` (string) plus any
 * attributes. It is handed to the engine as sent, so every protocol answers exactly what the engine
 * does: a context that is not an object evaluates to ERROR / INVALID_CONTEXT, a targetingKey that
 * is not a non-empty string counts as missing (docs/evaluation.md#context,
 * test/evaluation/cases.json).
 */
export const ContextSchema = z
  .unknown()
  .describe('Evaluation context: an object with targetingKey (string) plus any attributes; anything else evaluates to ERROR / INVALID_CONTEXT');

/** The context of a request: `{}` when absent, otherwise exactly what was sent (null included). */
export function contextOf(value: unknown): EvaluationContext {
  return (value === undefined ? {} : value) as EvaluationContext;
}

const FlagKey = z.string().min(1).max(256);
const ServiceId = z
  .string()
  .min(1)
  .max(128)
  .optional()
  .describe('Required, except with a bound project API token, whose own service it defaults to (docs/api-reference.md#project-api-tokens)');
const DefaultedEnvironment = EnvironmentSchema.describe("Defaults to development when absent (a bound project API token: to the token's own)");

export const EvaluateBody = z
  .object({
    flagKey: FlagKey,
    serviceId: ServiceId,
    environment: DefaultedEnvironment.optional(),
    defaultValue: z.unknown().optional().describe('Returned with reason ERROR when the flag does not exist'),
    context: ContextSchema.optional(),
  })
  .strict();
export type EvaluateBody = z.infer<typeof EvaluateBody>;

export const BATCH_LIMIT = 100;
export const DEMO_BATCH_LIMIT = 4096;

const BatchItem = z
  .object({ flagKey: FlagKey.optional(), key: FlagKey.optional(), defaultValue: z.unknown().optional() })
  .strict()
  .refine((item) => (item.flagKey ?? item.key) !== undefined, { message: 'each flag needs flagKey (or key)' });

export type BatchBody = z.infer<typeof BatchBody>;
export const BatchBody = z
  .object({
    serviceId: ServiceId,
    environment: DefaultedEnvironment.optional(),
    flags: z.array(BatchItem).min(1).max(DEMO_BATCH_LIMIT).describe('At most 100 flags (4,096 on a demo service)'),
    context: ContextSchema.optional(),
  })
  .strict();

const BATCH_FIELDS = new Set(['serviceId', 'environment', 'flags', 'context']);
const ITEM_FIELDS = new Set(['flagKey', 'key', 'defaultValue']);
const isFlagKey = (v: unknown) => typeof v === 'string' && v.length >= 1 && v.length <= 256;

/**
 * BatchBody checked without zod (4,096 items through zod cost 5-50 ms, most of a demo batch's
 * server time): the body when it certainly passes BatchBody, undefined otherwise, so zod then
 * decides and gives the exact 400. test/evaluation/quick-body.test.ts holds it to zod.
 */
export function quickBatchBody(raw: unknown): BatchBody | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  for (const key in raw) if (!BATCH_FIELDS.has(key)) return undefined;
  const { serviceId, environment, flags } = raw as Record<string, unknown>;
  if (serviceId !== undefined && (typeof serviceId !== 'string' || serviceId.length < 1 || serviceId.length > 128)) return undefined;
  if (environment !== undefined && !(ENVIRONMENTS as readonly unknown[]).includes(environment)) return undefined;
  if (!Array.isArray(flags) || flags.length < 1 || flags.length > DEMO_BATCH_LIMIT) return undefined;
  for (const item of flags) {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return undefined;
    for (const key in item) if (!ITEM_FIELDS.has(key)) return undefined;
    const { flagKey, key } = item as Record<string, unknown>;
    if (flagKey === undefined ? key === undefined || !isFlagKey(key) : !isFlagKey(flagKey) || (key !== undefined && !isFlagKey(key))) return undefined;
  }
  return raw as BatchBody;
}

export const DebugQuery = z.object({ debug: z.enum(['true', 'false']).optional() }).passthrough();

export const EvaluationResultSchema = z
  .object({
    flagKey: z.string(),
    value: z.unknown(),
    reason: z.enum(['TARGETING_MATCH', 'DEFAULT', 'VARIANT', 'ERROR']),
    variant: z.string().optional(),
    errorCode: z.string().optional(),
    errorMessage: z.string().optional(),
    _debug: z
      .object({
        timings: z.object({ rateLimit: z.number(), validation: z.number(), cacheGet: z.number(), evaluate: z.number() }),
        cacheHit: z.boolean(),
        totalMs: z.number(),
      })
      .optional(),
  })
  .passthrough();

export const OfrepBody = z.object({ context: ContextSchema.optional() }).passthrough();

/** Validates like the route builder does, so the lean path and Express answer 400 identically. */
export function validateBody<S extends ZodTypeAny>(schema: S, input: unknown): z.infer<S> | HttpError {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  return validationFailed(parsed.error.issues.map((issue) => ({ path: ['body', ...issue.path].join('.'), message: issue.message })));
}

/** Query validation with the route builder's 400 shape (paths `query.<field>`). */
export function validateQuery<S extends ZodTypeAny>(schema: S, input: unknown): z.infer<S> | HttpError {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  return validationFailed(parsed.error.issues.map((issue) => ({ path: ['query', ...issue.path].join('.'), message: issue.message })));
}
