import { z } from 'zod';
import type { FieldProblem } from '../../http/errors';
import { MAX_MATCHES_PER_FLAG, OPERATORS, validateCondition, valueMatchesType } from '../evaluation/engine';
import { ENVIRONMENTS, FLAG_TYPES, type FlagPatch, type FlagType } from './types';

/**
 * Write-time rules for flag content, shared by every writer (routes, bulk, import, triggers):
 * the zod schemas check shapes, `flagContentProblems` checks what depends on the flag's type
 * and on several fields together.
 */

/** Letters and digits first, then letters, digits, `.`, `_`, `-`; at most 128 characters. */
export const FLAG_KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** Keys that would be shadowed by fixed routes under /api/flags/ and so could never be addressed. */
export const RESERVED_FLAG_KEYS: ReadonlySet<string> = new Set(['evaluate', 'stream', 'bulk', 'export', 'import']);

export const LIMITS = {
  name: 200,
  description: 4000,
  tags: 50,
  tag: 64,
  variants: 100,
  variantName: 100,
  rules: 200,
  ruleId: 128,
  conditionsPerRule: 50,
  /** `matches` conditions over all rules of a flag: each runs a pattern on every evaluation. */
  matchesPerFlag: MAX_MATCHES_PER_FLAG,
  property: 256,
} as const;

const WEIGHT_TOTAL = 100;
const WEIGHT_TOLERANCE = 1e-6;

const TYPE_WORD: Record<FlagType, string> = {
  boolean: 'a boolean',
  string: 'a string',
  number: 'a finite number',
  object: 'a JSON object or array',
};

/** JSON with object keys sorted: stored jsonb reorders keys, so plain JSON.stringify would see changes that are not. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** What a flag of each type returns when no default is given. */
export function zeroValue(type: FlagType): unknown {
  switch (type) {
    case 'boolean':
      return false;
    case 'string':
      return '';
    case 'number':
      return 0;
    case 'object':
      return {};
  }
}

export function flagKeyProblem(key: string): string | null {
  if (!FLAG_KEY_PATTERN.test(key)) {
    return 'must start with a letter or digit and contain only letters, digits, ".", "_" and "-" (at most 128 characters)';
  }
  if (RESERVED_FLAG_KEYS.has(key)) return `"${key}" is reserved by the API (${[...RESERVED_FLAG_KEYS].join(', ')})`;
  return null;
}

/**
 * Problems with (part of) a flag's content. Only the present fields are checked; value checks
 * need `type` and are skipped without it. Paths are relative to the flag (`variants.1.weight`),
 * prefixed with `pathPrefix`.
 */
export function flagContentProblems(content: FlagPatch, type: FlagType | undefined, pathPrefix = ''): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const add = (path: (string | number)[], message: string) => problems.push({ path: pathPrefix + path.join('.'), message });
  const checkValue = (path: (string | number)[], value: unknown) => {
    if (value === undefined) add(path, 'Required');
    else if (type && !valueMatchesType(type, value)) add(path, `must be ${TYPE_WORD[type]} to match the flag type "${type}"`);
  };

  if ('defaultValue' in content) checkValue(['defaultValue'], content.defaultValue);

  if (content.variants) {
    const names = new Set<string>();
    let total = 0;
    content.variants.forEach((variant, i) => {
      if (names.has(variant.name)) add(['variants', i, 'name'], `duplicate variant name "${variant.name}"`);
      names.add(variant.name);
      checkValue(['variants', i, 'value'], variant.value);
      total += variant.weight;
    });
    if (content.variants.length > 0 && Math.abs(total - WEIGHT_TOTAL) > WEIGHT_TOLERANCE) {
      add(['variants'], `variant weights must sum to ${WEIGHT_TOTAL} (they sum to ${Number(total.toFixed(6))})`);
    }
  }

  if (content.targeting) {
    const ids = new Set<string>();
    let patterns = 0;
    content.targeting.forEach((rule, i) => {
      if (rule.id !== undefined) {
        if (ids.has(rule.id)) add(['targeting', i, 'id'], `duplicate rule id "${rule.id}"`);
        ids.add(rule.id);
      }
      rule.conditions.forEach((condition, j) => {
        const problem = validateCondition(condition);
        if (problem) add(['targeting', i, 'conditions', j], problem);
        if (condition.operator === 'matches') patterns++;
      });
      checkValue(['targeting', i, 'value'], rule.value);
    });
    if (patterns > LIMITS.matchesPerFlag) {
      add(['targeting'], `at most ${LIMITS.matchesPerFlag} "matches" conditions per flag (over all rules); this flag has ${patterns}`);
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// Shapes (zod): used by the routes for validation and the OpenAPI document.

/** Any JSON value, but present (a missing `value` is an error, `null` is checked by type). */
const JsonValue = z.unknown().refine((v) => v !== undefined, { message: 'Required' });

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

export const TargetingRuleSchema = z
  .object({
    id: z.string().trim().min(1).max(LIMITS.ruleId).optional(),
    conditions: z.array(ConditionSchema).max(LIMITS.conditionsPerRule).default([]),
    value: JsonValue,
    rolloutPercentage: z.number().finite().min(0).max(100).optional(),
  })
  .strict();

export const FlagContentShape = {
  name: z.string().trim().min(1).max(LIMITS.name),
  description: z.string().max(LIMITS.description),
  type: z.enum(FLAG_TYPES),
  enabled: z.boolean(),
  defaultValue: JsonValue,
  tags: z.array(z.string().trim().min(1).max(LIMITS.tag)).max(LIMITS.tags),
  variants: z.array(VariantSchema).max(LIMITS.variants),
  targeting: z.array(TargetingRuleSchema).max(LIMITS.rules),
  isPublic: z.boolean(),
};

export const FlagKeySchema = z
  .string()
  .superRefine((key, ctx) => {
    const problem = flagKeyProblem(key);
    if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
  })
  .describe(`Pattern ${FLAG_KEY_PATTERN.source}; case-sensitive; not one of ${[...RESERVED_FLAG_KEYS].join(', ')}`);

export const FlagCreateSchema = z
  .object({
    key: FlagKeySchema,
    serviceId: z.string().min(1).max(200),
    environment: z.enum(ENVIRONMENTS).optional(),
    projectId: z.string().min(1).max(200).optional(),
    name: FlagContentShape.name.optional(),
    description: FlagContentShape.description.optional(),
    type: FlagContentShape.type.optional(),
    enabled: FlagContentShape.enabled.optional(),
    defaultValue: z.unknown().optional(),
    tags: FlagContentShape.tags.optional(),
    variants: FlagContentShape.variants.optional(),
    targeting: FlagContentShape.targeting.optional(),
    isPublic: FlagContentShape.isPublic.optional(),
  })
  .strict()
  .superRefine((body, ctx) => {
    const type = body.type ?? 'boolean';
    const content = { ...body, defaultValue: 'defaultValue' in body && body.defaultValue !== undefined ? body.defaultValue : zeroValue(type) };
    for (const p of flagContentProblems(content, type)) ctx.addIssue({ code: z.ZodIssueCode.custom, path: p.path.split('.'), message: p.message });
  });

/** Fields that identify a flag: refused on PATCH (a flag is never moved). */
const IDENTITY_FIELDS = ['key', 'serviceId', 'environment', 'projectId'] as const;

export const FlagPatchSchema = z
  .object({
    name: FlagContentShape.name.optional(),
    description: FlagContentShape.description.optional(),
    type: FlagContentShape.type.optional(),
    enabled: FlagContentShape.enabled.optional(),
    defaultValue: z.unknown().optional(),
    tags: FlagContentShape.tags.optional(),
    variants: FlagContentShape.variants.optional(),
    targeting: FlagContentShape.targeting.optional(),
    isPublic: FlagContentShape.isPublic.optional(),
    version: z.number().int().positive().optional().describe('Expected current version; a stale one gets 409'),
    // Declared only so they get a precise message instead of "unrecognized key".
    key: z.unknown().optional().describe('Not writable'),
    serviceId: z.unknown().optional().describe('Not writable'),
    environment: z.unknown().optional().describe('Not writable'),
    projectId: z.unknown().optional().describe('Not writable'),
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
    for (const p of flagContentProblems(body as FlagPatch, body.type)) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: p.path.split('.'), message: p.message });
    }
  });
