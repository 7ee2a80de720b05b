import {
  BUCKET_COUNT,
  ROLLOUT_SALT,
  VARIANT_SALT,
  compileCohort,
  compileFlag,
  isOperator,
  validateCondition,
  type CohortDefinition,
  type CompiledFlag,
  type Condition,
  type FlagDefinition,
} from '../evaluation/engine/index';
import { toComparableNumber } from '../evaluation/engine/comparison';
import { valueMatchesType } from '../evaluation/engine/value-types';
import type { z } from 'zod';
import type { InProcessIssueSchema } from '../flags/schema';
import { canonicalJson, zeroValue } from '../flags/validation';

/**
 * Our flags as a flagd flag-definition document (docs/flagd.md): what the flagd sync service
 * streams to in-process providers and relays. Variant names: our variants by name, a rule's
 * value as `rule:<ruleId>`, the flag's default value as `default`, a disabled flag's value as
 * `disabled`. Each operator's translation, and where it is exact, is in
 * docs/flagd.md#operators.
 */

export const FLAGD_SCHEMA_URL = 'https://flagd.dev/schema/v0/flags.json';

export type FlagdState = 'ENABLED' | 'DISABLED';

export interface FlagdFlag {
  state: FlagdState;
  variants: Record<string, unknown>;
  /** Absent when the flag's default cannot be served (a value of another type than the flag's): targeting then always names a variant. */
  defaultVariant?: string;
  targeting?: unknown;
  metadata: Record<string, string | number | boolean>;
}

export interface FlagdDocument {
  $schema: string;
  flags: Record<string, FlagdFlag>;
  $evaluators?: Record<string, unknown>;
}

/** The part of a stored flag the translation reads. */
export type TranslatableFlag = FlagDefinition & { version: number };

/**
 * Why a flag cannot be evaluated exactly in-process: one entry per offending condition, or per
 * value flagd cannot hold (`operator` null; `ruleId` null for the default and the variants).
 */
export type InProcessIssue = z.infer<typeof InProcessIssueSchema>;

/** An issue with where it is in the flag, as a write error's path (`targeting.0.conditions.1.operator`). */
export interface LocatedInProcessIssue extends InProcessIssue {
  path: string;
}

export const DEFAULT_VARIANT = 'default';
export const DISABLED_VARIANT = 'disabled';
export const RULE_VARIANT_PREFIX = 'rule:';
/**
 * Targeting results that name no defined variant: every provider then answers ERROR with the
 * caller's default, which is what we answer in these cases (docs/flagd.md#errors).
 */
export const UNSUPPORTED_VARIANT = 'error:unsupported';
export const TARGETING_KEY_MISSING_VARIANT = 'error:targeting-key-missing';
export const TYPE_MISMATCH_VARIANT = 'error:type-mismatch';

/** What a flag's variants hold when none of its values can be held: never served. */
const UNSERVED_VARIANT = 'unserved';

const ERROR_VARIANTS: ReadonlySet<string> = new Set([UNSUPPORTED_VARIANT, TARGETING_KEY_MISSING_VARIANT, TYPE_MISMATCH_VARIANT]);

/** Prefix of a cohort's entry in the document's `$evaluators`. */
const COHORT_EVALUATOR_PREFIX = 'cohort:';

// ---------------------------------------------------------------------------------------------
// JsonLogic building blocks (docs/flagd.md#operators). Every one of them is false, never an
// error, for a missing or null attribute and for an attribute of another type: flagd's
// JsonLogic throws on some type mixes (`>` of an object), which would make the whole flag an
// ERROR where our engine only makes the condition false.

type Logic = unknown;

const TARGETING_KEY: Logic = { var: 'targetingKey' };

const not = (logic: Logic): Logic => ({ '!': [logic] });

function allOf(parts: Logic[]): Logic {
  const kept = parts.filter((part) => part !== true);
  if (kept.includes(false)) return false;
  if (kept.length === 0) return true;
  return kept.length === 1 ? kept[0] : { and: kept };
}

function anyOf(parts: Logic[]): Logic {
  const kept = parts.filter((part) => part !== false);
  if (kept.includes(true)) return true;
  if (kept.length === 0) return false;
  return kept.length === 1 ? kept[0] : { or: kept };
}

/** flagd's starts_with answers null (false) for anything but two strings. */
const isString = (x: Logic): Logic => ({ starts_with: [x, ''] });
/** Not an array: an array is not among its own merged elements, anything else is. */
const isNotArray = (x: Logic): Logic => ({ in: [x, { merge: [x] }] });
/** Strict equality: flagd (Go) errors on `in [true, false]` for a number and on `cat` of a boolean. */
const isBoolean = (x: Logic): Logic => ({ or: [{ '===': [x, true] }, { '===': [x, false] }] });
/**
 * A number: not null, not a string, boolean or array, and not an object (which `cat` writes
 * "[object Object]"). The order matters: flagd (Go) stops at the first false test, and errors on
 * the array test for a boolean and on `cat` of a boolean or an array.
 */
const isNumber = (x: Logic): Logic => ({
  and: [{ '!==': [x, null] }, not(isString(x)), not(isBoolean(x)), isNotArray(x), { '!==': [{ cat: [x] }, '[object Object]'] }],
});
const isPrimitive = (x: Logic): Logic => ({ or: [isString(x), isBoolean(x), isNumber(x)] });

/** The type test of a primitive operand's type. */
function isTypeOf(operand: unknown): (x: Logic) => Logic {
  return typeof operand === 'string' ? isString : typeof operand === 'boolean' ? isBoolean : isNumber;
}

/** Type-strict membership: each type's members tested by that type; flagd (Go) errors on `in` across types. */
function memberOf(x: Logic, members: unknown[]): Logic {
  const byType = new Map<(x: Logic) => Logic, unknown[]>();
  for (const member of members) {
    const test = isTypeOf(member);
    byType.set(test, [...(byType.get(test) ?? []), member]);
  }
  return anyOf([...byType].map(([test, sameType]) => ({ and: [test(x), { in: [x, sameType] }] })));
}

/** Our "has a targeting key": a non-empty string (docs/evaluation.md#context). */
const HAS_TARGETING_KEY: Logic = { and: [isString(TARGETING_KEY), { '!==': [TARGETING_KEY, ''] }] };

/** flagd's fractional over an explicit bucketing string: our bucket input `${salt}:${flagKey}:${targetingKey}`. */
function fractional(salt: string, flagKey: string, buckets: [string, number][]): Logic {
  return { fractional: [{ cat: [`${salt}:${flagKey}:`, TARGETING_KEY] }, ...buckets] };
}

// ---------------------------------------------------------------------------------------------
// Conditions

/** Segment names flagd's JsonLogic would read from the prototype (`constructor.name` is "Object"). */
const INHERITED_NAMES: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));

/** Why flagd cannot read `property` as we do, or null. */
function propertyProblem(property: string): string | null {
  if (property.includes('\\')) return 'flagd reads a backslash in an attribute name as an escape';
  const segments = property.split('.');
  if (segments.includes('')) return 'flagd cannot read an attribute name with an empty dotted segment';
  if (segments[0] === '$flagd') return 'flagd puts its own $flagd attribute in every context';
  const inherited = segments.find((segment) => INHERITED_NAMES.has(segment));
  if (inherited !== undefined) return `flagd reads "${inherited}" from the object prototype`;
  return null;
}

type ConditionTranslation = { logic: Logic } | { problem: string };

const impossible = (problem: string): ConditionTranslation => ({ problem });

function translateCondition(condition: Condition, cohortLogic: (id: string) => ConditionTranslation): ConditionTranslation {
  const invalid = validateCondition(condition);
  // A condition that cannot compile makes its rule never match (compile.ts): the caller skips the rule.
  if (invalid !== null || !isOperator(condition.operator)) return impossible(invalid ?? 'unknown operator');
  const { property, value } = condition;
  if (condition.operator === 'in_cohort') return cohortLogic(value as string);
  const problem = propertyProblem(property);
  if (problem !== null) return impossible(problem);
  const x: Logic = { var: property };
  switch (condition.operator) {
    case 'equals':
      return { logic: { '===': [x, value] } };
    case 'not_equals':
      return { logic: { and: [isPrimitive(x), { '!==': [x, value] }] } };
    case 'in':
      return { logic: memberOf(x, value as unknown[]) };
    case 'not_in':
      return { logic: { and: [isPrimitive(x), not(memberOf(x, value as unknown[]))] } };
    case 'contains':
      // A string attribute: substring of a string operand. An array attribute: has the operand
      // (merge spreads an array and wraps anything else, so a scalar equal to the operand is ruled out).
      if (typeof value === 'string') {
        return { logic: { or: [{ and: [isString(x), { in: [value, x] }] }, { and: [not(isString(x)), { in: [value, { merge: [x] }] }] }] } };
      }
      return { logic: { and: [{ in: [value, { merge: [x] }] }, { '!==': [x, value] }] } };
    case 'starts_with':
    case 'ends_with':
      return { logic: { [condition.operator]: [x, value] } };
    case 'matches':
      return impossible('flagd has no regular-expression operator');
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      const bound = toComparableNumber(value);
      if (Number.isNaN(bound)) return impossible(`flagd cannot compare dates: ${condition.operator} with a date operand`);
      const symbol = { gt: '>', gte: '>=', lt: '<', lte: '<=' }[condition.operator];
      return { logic: { and: [isNumber(x), { [symbol]: [x, bound] }] } };
    }
    case 'semver_eq':
    case 'semver_gt':
    case 'semver_lt': {
      const symbol = { semver_eq: '=', semver_gt: '>', semver_lt: '<' }[condition.operator];
      // flagd's schema wants the operand without our optional leading "v" (flagd ignores it too).
      return { logic: { and: [isString(x), { sem_ver: [x, symbol, (value as string).replace(/^v/, '')] }] } };
    }
    case 'before':
    case 'after':
      return impossible(`flagd cannot compare dates: ${condition.operator}`);
    case 'exists':
      return { logic: { [value === false ? '===' : '!==']: [x, null] } };
  }
}

// ---------------------------------------------------------------------------------------------
// Cohorts: each one a document-level `$evaluators` entry, translated once per definition object.

interface CohortTranslation {
  /** The cohort's membership test; undefined when a condition has no flagd equivalent. */
  logic: Logic | undefined;
  /** Each condition without a flagd equivalent, with its path in the cohort (`rules.0.conditions.1.operator`). */
  problems: { path: string; message: string }[];
}

const cohortTranslations = new WeakMap<CohortDefinition, CohortTranslation>();

function translateCohort(definition: CohortDefinition): CohortTranslation {
  const kept = cohortTranslations.get(definition);
  if (kept !== undefined) return kept;
  const compiled = compileCohort(definition);
  const usable = new Set(compiled.ruleIds);
  const problems: CohortTranslation['problems'] = [];
  const rules: Logic[] = [];
  definition.rules.forEach((rule, ruleIndex) => {
    // Rules that cannot compile never match (compile.ts): leaving them out is exact.
    if (!usable.has(rule.id)) return;
    const parts: Logic[] = [];
    rule.conditions.forEach((condition, conditionIndex) => {
      const translated = translateCondition(condition, () => impossible('cohorts do not nest'));
      if ('problem' in translated) problems.push({ path: `rules.${ruleIndex}.conditions.${conditionIndex}.operator`, message: translated.problem });
      else parts.push(translated.logic);
    });
    rules.push(allOf(parts));
  });
  // flagd-core finds a $ref by its text: an id JSON would escape is never found.
  if (JSON.stringify(definition.id) !== `"${definition.id}"`) problems.push({ path: 'id', message: `cohort id ${JSON.stringify(definition.id)} cannot be referenced in flagd` });
  const made: CohortTranslation = { logic: problems.length > 0 ? undefined : anyOf(rules), problems };
  cohortTranslations.set(definition, made);
  return made;
}

// ---------------------------------------------------------------------------------------------
// Flags

interface FlagTranslation {
  flag: FlagdFlag;
  issues: LocatedInProcessIssue[];
  /** `$evaluators` entries its targeting references. */
  evaluators: Map<string, Logic>;
  /** The cohort definitions it was made from, by id (undefined: unknown): a different one makes it stale. */
  cohorts: Map<string, CohortDefinition | undefined>;
}

/** Translations by flag record: a record is one version of a flag, and sync payloads are rebuilt after every change. */
const flagTranslations = new WeakMap<TranslatableFlag, FlagTranslation>();

function translation(flag: TranslatableFlag, cohorts: ReadonlyMap<string, CohortDefinition>): FlagTranslation {
  const kept = flagTranslations.get(flag);
  if (kept !== undefined && [...kept.cohorts].every(([id, definition]) => cohorts.get(id) === definition)) return kept;
  const made = translateFlag(flag, cohorts);
  flagTranslations.set(flag, made);
  return made;
}

/**
 * The variants of the translated flag: each name holds one value. A name asked for twice with
 * different values (a variant of ours called `default` holding another value than the flag's
 * default...) cannot be kept apart in flagd.
 */
class VariantTable {
  readonly values: Record<string, unknown> = {};
  private readonly canonical = new Map<string, string>();

  /** False when the name already holds another value. */
  define(name: string, value: unknown): boolean {
    const text = canonicalJson(value);
    const existing = this.canonical.get(name);
    if (existing !== undefined) return existing === text;
    this.canonical.set(name, text);
    this.values[name] = value;
    return true;
  }
}

/**
 * The bucket boundaries of the variants: variant i takes buckets [boundary[i], boundary[i+1]).
 * A bucket b picks the first variant whose cumulated weight exceeds (b / BUCKET_COUNT) * total
 * (evaluate.ts variantAt): the boundary is the least b for which that comparison, computed in
 * the same floating point, is false. About ceil(cumulated * 100000 / total), adjusted where
 * rounding moves it.
 */
function variantBoundaries(compiled: CompiledFlag): number[] {
  const total = compiled.totalVariantWeight;
  const before = (b: number, cumulative: number) => (b / BUCKET_COUNT) * total < cumulative;
  const boundaries = [0];
  for (let i = 0; i < compiled.variants.length - 1; i++) {
    const cumulative = compiled.variants[i].cumulativeWeight;
    let b = Math.min(BUCKET_COUNT, Math.max(0, Math.ceil((cumulative * BUCKET_COUNT) / total)));
    while (b > 0 && !before(b - 1, cumulative)) b--;
    while (b < BUCKET_COUNT && before(b, cumulative)) b++;
    boundaries.push(Math.max(b, boundaries[boundaries.length - 1]));
  }
  boundaries.push(BUCKET_COUNT);
  return boundaries;
}

function translateFlag(flag: TranslatableFlag, cohorts: ReadonlyMap<string, CohortDefinition>): FlagTranslation {
  const compiled = compileFlag(flag, cohorts);
  const issues: LocatedInProcessIssue[] = [];
  const evaluators = new Map<string, Logic>();
  const usedCohorts = new Map<string, CohortDefinition | undefined>();
  const variants = new VariantTable();
  const metadata: FlagdFlag['metadata'] = { flagKey: flag.key, version: flag.version, type: flag.type };

  const cohortLogic = (id: string): ConditionTranslation => {
    const definition = cohorts.get(id);
    usedCohorts.set(id, definition);
    // An unknown cohort never holds (compile.ts).
    if (definition === undefined) return { logic: false };
    const cohort = translateCohort(definition);
    if (cohort.logic === undefined) {
      return impossible(cohort.problems.map((problem) => `cohort ${JSON.stringify(id)} ${problem.path}: ${problem.message}`).join('; '));
    }
    if (cohort.logic === true || cohort.logic === false) return { logic: cohort.logic };
    const name = COHORT_EVALUATOR_PREFIX + id;
    evaluators.set(name, cohort.logic);
    return { logic: { $ref: name } };
  };

  /**
   * The variant that serves `value`, or a name no variant has when its type is not the flag's
   * (we answer TYPE_MISMATCH: ERROR with the caller's default).
   */
  const served = (name: string, value: unknown, paths: { value: string; name: string }, ruleId: string | null): string => {
    if (!valueMatchesType(compiled.type, value)) return TYPE_MISMATCH_VARIANT;
    if (Array.isArray(value)) {
      issues.push({ ruleId, operator: null, path: paths.value, message: "flagd's object flags hold JSON objects: an array value cannot be served in-process" });
    } else if (ERROR_VARIANTS.has(name) || !variants.define(name, value)) {
      issues.push({ ruleId, operator: null, path: paths.name, message: `variant name ${JSON.stringify(name)} is used by the flagd translation for another value` });
    }
    return name;
  };

  const defaultServed = served(compiled.enabled ? DEFAULT_VARIANT : DISABLED_VARIANT, compiled.defaultValue, { value: 'defaultValue', name: 'defaultValue' }, null);

  const branches: Logic[] = [];
  const targeting = Array.isArray(flag.targeting) ? flag.targeting : [];
  compiled.rules.forEach((rule, ruleIndex) => {
    // A rule that cannot compile never matches, nor does a rollout of 0%.
    if (!rule.usable) return;
    const conditions = targeting[ruleIndex].conditions;
    const parts: Logic[] = [];
    conditions.forEach((condition, conditionIndex) => {
      const translated = translateCondition(condition, cohortLogic);
      if ('problem' in translated) {
        issues.push({ ruleId: rule.id, operator: condition.operator, path: `targeting.${ruleIndex}.conditions.${conditionIndex}.operator`, message: translated.problem });
      } else parts.push(translated.logic);
    });
    if (rule.rolloutThreshold <= 0) return;
    if (rule.rolloutThreshold < BUCKET_COUNT) {
      // A partial rollout never holds a context without a targeting key: the next rule decides.
      parts.push(HAS_TARGETING_KEY, {
        '===': [fractional(ROLLOUT_SALT, flag.key, [['in', rule.rolloutThreshold], ['out', BUCKET_COUNT - rule.rolloutThreshold]]), 'in'],
      });
    }
    branches.push(allOf(parts), served(RULE_VARIANT_PREFIX + rule.id, rule.value, { value: `targeting.${ruleIndex}.value`, name: `targeting.${ruleIndex}.id` }, rule.id));
  });

  let last: Logic = defaultServed;
  if (compiled.variants.length > 0) {
    const boundaries = variantBoundaries(compiled);
    const buckets = compiled.variants.map((variant, index): [string, number] => [
      served(variant.name, variant.value, { value: `variants.${index}.value`, name: `variants.${index}.name` }, null),
      boundaries[index + 1] - boundaries[index],
    ]);
    // flagd's fractional takes two buckets at least; one variant holds every bucket anyway.
    const pick = buckets.length === 1 ? buckets[0][0] : fractional(VARIANT_SALT, flag.key, buckets);
    // Without a targeting key there is nothing to bucket: ERROR with the caller's default.
    last = { if: [HAS_TARGETING_KEY, pick, TARGETING_KEY_MISSING_VARIANT] };
  }

  const made = (translated: FlagdFlag): FlagTranslation => {
    // Providers refuse a flag without variants (the Python one the whole document): one that is never served.
    if (Object.keys(translated.variants).length === 0) translated.variants = { [UNSERVED_VARIANT]: zeroValue(compiled.type) };
    return { flag: translated, issues, evaluators, cohorts: usedCohorts };
  };
  if (issues.length > 0) {
    const holdable = defaultServed !== TYPE_MISMATCH_VARIANT && !Array.isArray(compiled.defaultValue);
    evaluators.clear();
    return made({
      state: 'ENABLED',
      variants: holdable ? { [DEFAULT_VARIANT]: compiled.defaultValue } : {},
      targeting: { if: [true, UNSUPPORTED_VARIANT, UNSUPPORTED_VARIANT] },
      metadata: { ...metadata, inProcess: 'unsupported' },
    });
  }
  if (!compiled.enabled) {
    // A disabled flag answers its default (flagd's own DISABLED state would answer the caller's): its rules need no variants.
    evaluators.clear();
    return made(constantFlag(defaultServed, defaultServed === TYPE_MISMATCH_VARIANT ? {} : { [defaultServed]: compiled.defaultValue }, metadata));
  }
  const translated: FlagdFlag = { state: 'ENABLED', variants: variants.values, metadata };
  if (defaultServed !== TYPE_MISMATCH_VARIANT) translated.defaultVariant = defaultServed;
  // Nothing to decide: flagd serves defaultVariant without targeting.
  if (branches.length > 0 || last !== DEFAULT_VARIANT) translated.targeting = branches.length === 0 ? last : { if: [...branches, last] };
  if (typeof translated.targeting === 'string') return made(constantFlag(translated.targeting, variants.values, metadata));
  return made(translated);
}

/** A flag that always serves `variant`: its defaultVariant when defined, else targeting naming it. */
function constantFlag(variant: string, variants: Record<string, unknown>, metadata: FlagdFlag['metadata']): FlagdFlag {
  if (Object.hasOwn(variants, variant)) return { state: 'ENABLED', variants, defaultVariant: variant, metadata };
  return { state: 'ENABLED', variants, targeting: { if: [true, variant, variant] }, metadata };
}

/** Why flags naming the cohort cannot be evaluated exactly in-process (empty when they can), with each problem's path in the cohort. */
export function cohortInProcessProblems(definition: CohortDefinition): { path: string; message: string }[] {
  return translateCohort(definition).problems;
}

/** Why the flag cannot be evaluated exactly in-process (empty when it can), with each issue's path in the flag. */
export function locatedInProcessIssues(flag: TranslatableFlag, cohorts: ReadonlyMap<string, CohortDefinition>): LocatedInProcessIssue[] {
  return translation(flag, cohorts).issues;
}

/** Why the flag cannot be evaluated exactly in-process: empty when it can (docs/flagd.md#compatibility). */
export function inProcessIssues(flag: TranslatableFlag, cohorts: ReadonlyMap<string, CohortDefinition>): InProcessIssue[] {
  return locatedInProcessIssues(flag, cohorts).map(({ ruleId, operator, message }) => ({ ruleId, operator, message }));
}

/** The flagd document of a flag set, with the cohorts its in_cohort conditions name. */
export function toFlagdDocument(flags: Iterable<TranslatableFlag>, cohorts: ReadonlyMap<string, CohortDefinition>): FlagdDocument {
  const out: Record<string, FlagdFlag> = {};
  const evaluators: Record<string, unknown> = {};
  for (const flag of flags) {
    const translated = translation(flag, cohorts);
    out[flag.key] = translated.flag;
    for (const [name, logic] of translated.evaluators) evaluators[name] = logic;
  }
  const document: FlagdDocument = { $schema: FLAGD_SCHEMA_URL, flags: out };
  if (Object.keys(evaluators).length > 0) document.$evaluators = evaluators;
  return document;
}
