import type { FieldProblem } from '../../http/errors';
import { MAX_MATCHES_PER_FLAG, validateCondition, valueMatchesType, type FlagType, type TargetingRule, type Variant } from '../evaluation/engine';

/**
 * Write-time rules for flag content, shared by every writer (routes, bulk, import, triggers):
 * the schemas in ./schema.ts check shapes, `flagContentProblems` checks what depends on the
 * flag's type and on several fields together.
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
  /** Why a toggle was made, kept in its audit entry (docs/api-reference.md#flags). */
  toggleReason: 500,
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
export function zeroValue(type: FlagType): boolean | string | number | Record<string, never> {
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
 * The content fields the cross-field rules read, in the engine's terms (the schemas in ./schema.ts
 * derive from these rules, so this module does not import their types).
 */
export interface CheckedContent {
  defaultValue?: unknown;
  variants?: readonly Variant[];
  targeting?: readonly (Omit<TargetingRule, 'id'> & { id?: string })[];
}

/**
 * Problems with (part of) a flag's content. Only the present fields are checked; value checks
 * need `type` and are skipped without it. Paths are relative to the flag (`variants.1.weight`),
 * prefixed with `pathPrefix`.
 */
export function flagContentProblems(content: CheckedContent, type: FlagType | undefined, pathPrefix = ''): FieldProblem[] {
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
