import { z } from 'zod';
import { EnvironmentSchema } from '../../domain/environments';
import { ActorDisplaySchema } from '../audit/actors';
import { FLAG_TYPES, OPERATORS } from '../evaluation/engine';
import { FLAG_KEY_PATTERN, flagContentProblems, flagKeyProblem, LIMITS, RESERVED_FLAG_KEYS, zeroValue } from './validation';

/**
 * The flag as one set of zod schemas: the content a write may change, the record the API
 * returns, the create and patch inputs derived from them, and a version of the history; plus
 * what a new flag starts with. The types in ./types.ts are inferred from these, the routes
 * validate and document with them, and the store maps the record's fields to columns
 * (FLAG_TABLE in ./store.ts). The rules that depend on the type or on several fields together
 * are in ./validation.ts.
 */

/** Any JSON value, but present (a missing `value` is an error, `null` is checked by type). */
const JsonValue = z.unknown().refine((v): v is NonNullable<unknown> | null => v !== undefined, { message: 'Required' });

export const FlagTypeSchema = z.enum(FLAG_TYPES);

export const VariantSchema = z
  .object({
    name: z.string().trim().min(1).max(LIMITS.variantName),
    value: JsonValue,
    weight: z.number().finite().min(0).max(100),
  })
  .strict();

export const ConditionSchema = z
  .object({
    property: z.string().min(1).max(LIMITS.property),
    operator: z.enum(OPERATORS),
    value: z.unknown().optional(),
  })
  .strict();

/** A targeting rule as written: without an id, one is generated. */
export const TargetingRuleInputSchema = z
  .object({
    id: z.string().trim().min(1).max(LIMITS.ruleId).optional(),
    conditions: z.array(ConditionSchema).max(LIMITS.conditionsPerRule).default([]),
    value: JsonValue,
    rolloutPercentage: z.number().finite().min(0).max(100).optional(),
  })
  .strict();

/** A targeting rule as stored: it always has its id. */
export const TargetingRuleSchema = TargetingRuleInputSchema.required({ id: true });

/** What a write may change; the record's other fields identify the flag or are kept by the store. */
export const FlagContentSchema = z.object({
  name: z.string().trim().min(1).max(LIMITS.name),
  description: z.string().max(LIMITS.description),
  type: FlagTypeSchema,
  enabled: z.boolean(),
  defaultValue: JsonValue,
  tags: z.array(z.string().trim().min(1).max(LIMITS.tag)).max(LIMITS.tags),
  variants: z.array(VariantSchema).max(LIMITS.variants),
  targeting: z.array(TargetingRuleSchema).max(LIMITS.rules),
  isPublic: z.boolean(),
});

export const FLAG_CONTENT_FIELDS = FlagContentSchema.keyof().options;

/** A flag as the API returns it. A flag is unique per (serviceId, environment, key). */
export const FlagRecordSchema = z.object({
  id: z.string(),
  projectId: z.string(),
  serviceId: z.string(),
  environment: EnvironmentSchema,
  key: z.string(),
  ...FlagContentSchema.shape,
  version: z.number().int().describe('Increments on every change; send it back on writes for optimistic concurrency'),
  createdAt: z.string(),
  updatedAt: z.string(),
});

/** Why a flag cannot be evaluated exactly by flagd's in-process providers (docs/flagd.md#compatibility). */
export const InProcessIssueSchema = z.object({
  ruleId: z.string().nullable().describe('The rule of the offending condition or value; null for the default value or a variant'),
  operator: z.string().nullable().describe('The operator without a flagd equivalent; null when a value or variant name is the reason'),
  message: z.string(),
});

/** Derived from the targeting and the cohorts it names on every read, never stored. */
export const InProcessCompatibilitySchema = z.object({
  inProcessCompatible: z.boolean().describe("flagd's in-process providers evaluate this flag exactly as we do (docs/flagd.md#compatibility)"),
  inProcessIssues: z.array(InProcessIssueSchema).describe('Why not, one entry per offending condition or value; empty when compatible'),
});

/** A flag as read and write routes answer it: the record and its in-process compatibility. */
export const FlagResponseSchema = FlagRecordSchema.extend(InProcessCompatibilitySchema.shape);

/** Content fields as a write gives them: any subset, rules possibly without ids. */
export const FlagContentPatchSchema = FlagContentSchema.extend({ targeting: z.array(TargetingRuleInputSchema).max(LIMITS.rules) }).partial();

/** The content of a new flag: what the create input gives, else these defaults (the key as name, the type's zero value). */
export function newFlagContent(input: z.infer<typeof FlagCreateSchema>): Required<z.infer<typeof FlagContentPatchSchema>> {
  const type = input.type ?? 'boolean';
  return {
    name: input.name ?? input.key,
    description: input.description ?? '',
    type,
    enabled: input.enabled ?? false,
    defaultValue: input.defaultValue === undefined ? zeroValue(type) : input.defaultValue,
    tags: input.tags ?? [],
    variants: input.variants ?? [],
    targeting: input.targeting ?? [],
    isPublic: input.isPublic ?? false,
  };
}

export const FlagKeySchema = z
  .string()
  .superRefine((key, ctx) => {
    const problem = flagKeyProblem(key);
    if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
  })
  .describe(`Pattern ${FLAG_KEY_PATTERN.source}; case-sensitive; not one of ${[...RESERVED_FLAG_KEYS].join(', ')}`);

/** Create input. Without `environment` the flag is created in every environment. */
export const FlagCreateSchema = z
  .object({
    key: FlagKeySchema,
    serviceId: z.string().min(1).max(200),
    environment: EnvironmentSchema.optional(),
    projectId: z.string().min(1).max(200).optional(),
    ...FlagContentPatchSchema.shape,
  })
  .strict()
  .superRefine((body, ctx) => {
    const type = body.type ?? 'boolean';
    const content = { ...body, defaultValue: body.defaultValue !== undefined ? body.defaultValue : zeroValue(type) };
    for (const p of flagContentProblems(content, type)) ctx.addIssue({ code: z.ZodIssueCode.custom, path: p.path.split('.'), message: p.message });
  });

/** Fields that identify a flag: refused on PATCH (a flag is never moved). */
const IDENTITY_FIELDS = ['key', 'serviceId', 'environment', 'projectId'] as const;

const notWritable = z.unknown().optional().describe('Not writable');

/** Optimistic concurrency on writes. */
export const ExpectedVersionSchema = z.number().int().positive().optional().describe('Expected current version; a stale one gets 409');

export const FlagPatchSchema = FlagContentPatchSchema.extend({
  version: ExpectedVersionSchema,
  // Declared only so they get a precise message instead of "unrecognized key".
  key: notWritable,
  serviceId: notWritable,
  environment: notWritable,
  projectId: notWritable,
})
  .strict()
  .superRefine((body, ctx) => {
    for (const field of IDENTITY_FIELDS) {
      if (body[field] !== undefined) {
        ctx.addIssue({
          code: z.ZodIssueCode.custom,
          path: [field],
          message: `${field} cannot be changed: a flag is never moved; create it where you want it and delete this one`,
        });
      }
    }
    const changed = Object.keys(body).filter((k) => k !== 'version' && body[k as keyof typeof body] !== undefined);
    if (changed.length === 0) ctx.addIssue({ code: z.ZodIssueCode.custom, path: [], message: 'give at least one field to change' });
    for (const p of flagContentProblems(body, body.type)) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: p.path.split('.'), message: p.message });
    }
  });

/** Toggle input: flips the flag, or sets `enabled` when given; `reason` goes to the audit entry. */
export const FlagToggleSchema = z
  .object({
    enabled: z.boolean().optional(),
    version: ExpectedVersionSchema,
    reason: z.string().trim().max(LIMITS.toggleReason).optional().describe('Why the flag is toggled, stored as the audit entry\'s `metadata.reason`'),
  })
  .strict();

export const FLAG_CHANGE_TYPES = ['create', 'update', 'toggle', 'delete', 'rollback'] as const;

/** One entry of a flag's history: the full flag as it was after that change. */
export const FlagVersionSchema = z.object({
  id: z.string(),
  version: z.number().int(),
  changeType: z.enum(FLAG_CHANGE_TYPES),
  snapshot: FlagRecordSchema.describe('The whole flag as it was after this change (before it, for delete)'),
  actor: z.string(),
  userId: z.string().nullable(),
  createdAt: z.string(),
});

/** A version as the history route returns it: with its actor named (docs/api-reference.md#audit-log). */
export const NamedFlagVersionSchema = FlagVersionSchema.extend({ actorDisplay: ActorDisplaySchema });

/** Validation problems of one item of a batch (bulk, import), as the error envelope's `details`. */
export const FieldProblemsSchema = z.array(z.object({ path: z.string(), message: z.string() }));
