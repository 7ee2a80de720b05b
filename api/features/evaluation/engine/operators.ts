/**
 * Condition operators: what each one means, how its operand is validated at write time and
 * parsed once at compile time, and how it is tested against a context attribute.
 *
 * Attribute lookup
 * - `property` names an own key of the context. When the context has no such key and the name
 *   contains dots, it is read as a path into nested objects: `user.plan` reads
 *   context.user.plan. Inherited keys (`constructor`, `__proto__`...) are never attributes.
 *
 * Missing attributes (absent or null) make every operator false, negations included: a rule
 * saying `country not_equals "FR"` does not match a context that has no country. This is what
 * LaunchDarkly and Unleash do; it keeps an incomplete context from slipping into a rule. The
 * one exception is `exists`: true iff the attribute is present and not null, or, with value
 * false, true iff it is absent or null.
 *
 * Operators (the attribute is the context value, the operand the condition value)
 * - equals / not_equals: operand is a string, number or boolean; type-strict ("5" is not 5).
 *   An object or array attribute is not comparable: both operators are false for it.
 * - in / not_in: operand is an array of strings, numbers or booleans; type-strict membership
 *   of a string, number or boolean attribute. Object and array attributes: both false.
 * - contains: a string attribute contains the string operand (substring), or an array
 *   attribute has the operand as an element (type-strict).
 * - starts_with / ends_with: string attribute and string operand. All string operators are
 *   case-sensitive.
 * - matches: the operand is a regular expression (JavaScript syntax, no flags) searched in a
 *   string attribute; see regex-safety.ts.
 * - gt / gte / lt / lte: with a number or numeric-string operand, numeric comparison of a
 *   number or numeric-string attribute ("42", "-1.5e3"; no blanks, no hex). With an ISO 8601
 *   date operand, the attribute is read as a date as for before/after.
 * - semver_eq / semver_gt / semver_lt: Semantic Versioning 2.0.0 precedence (section 11)
 *   between a version attribute and operand: MAJOR.MINOR.PATCH, optional prerelease, build
 *   metadata ignored, an optional leading "v" accepted. Partial versions ("1.2") are not
 *   versions: the condition is false.
 * - before / after: the attribute is an ISO 8601 date string or epoch milliseconds, strictly
 *   earlier or later than the operand (same forms). A date alone means UTC midnight, a time
 *   without an offset means UTC, so every instance reads a date the same way.
 * - exists: operand true or absent (present and not null), false (absent or null).
 * - in_cohort: the operand is the id of a cohort of the flag's project; true when any of the
 *   cohort's rules has all its conditions holding for the context. `property` is not read (by
 *   convention `targetingKey`), so a missing attribute does not make it false. The cohort's
 *   rules are compiled into the condition (compile.ts), so evaluation does no lookup; an
 *   unknown cohort never holds. Cohort rules cannot use in_cohort themselves: membership is one
 *   level deep, so a change to one cohort never cascades and a cycle cannot exist.
 * An attribute of another type than the operator reads (a number for starts_with, "abc" for
 * gt...) makes the condition false.
 */

import type { EvaluationBudget } from './budget';
import { isPrimitive, toComparableNumber, type Primitive } from './comparison';
import { parseIsoDate, toComparableDate } from './dates';
import { checkRegexSafety, MAX_MATCH_INPUT_LENGTH } from './regex-safety';
import { compareSemver, parseSemver, type Semver } from './semver';
import type { Condition } from './types';

export const OPERATORS = [
  'equals',
  'not_equals',
  'in',
  'not_in',
  'contains',
  'starts_with',
  'ends_with',
  'matches',
  'gt',
  'gte',
  'lt',
  'lte',
  'semver_eq',
  'semver_gt',
  'semver_lt',
  'before',
  'after',
  'exists',
  'in_cohort',
] as const;

export type Operator = (typeof OPERATORS)[number];

const OPERATOR_SET: ReadonlySet<string> = new Set(OPERATORS);

export function isOperator(name: unknown): name is Operator {
  return typeof name === 'string' && OPERATOR_SET.has(name);
}

// ---------------------------------------------------------------------------------------------
// Validation

const PRIMITIVE_MESSAGE = 'value must be a string, number or boolean';

/** Null when the condition can be stored; otherwise a message saying what is wrong. */
export function validateCondition(condition: Condition): string | null {
  if (typeof condition !== 'object' || condition === null) return 'condition must be an object';
  const { property, operator, value } = condition;
  if (typeof property !== 'string' || property.length === 0) return 'property must be a non-empty string';
  if (!isOperator(operator)) return `unknown operator ${JSON.stringify(operator)}; expected one of ${OPERATORS.join(', ')}`;
  switch (operator) {
    case 'equals':
    case 'not_equals':
    case 'contains':
      return isPrimitive(value) && !(typeof value === 'number' && !Number.isFinite(value)) ? null : PRIMITIVE_MESSAGE;
    case 'in':
    case 'not_in':
      if (!Array.isArray(value)) return `value must be an array for ${operator}`;
      return value.every(isPrimitive) ? null : 'every item of the array must be a string, number or boolean';
    case 'starts_with':
    case 'ends_with':
      return typeof value === 'string' ? null : 'value must be a string';
    case 'matches':
      return typeof value === 'string' ? checkRegexSafety(value) : 'value must be a regular expression string';
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      return !Number.isNaN(toComparableNumber(value)) || (typeof value === 'string' && !Number.isNaN(parseIsoDate(value)))
        ? null
        : 'value must be a number, a numeric string or an ISO 8601 date';
    case 'semver_eq':
    case 'semver_gt':
    case 'semver_lt':
      return typeof value === 'string' && parseSemver(value) !== undefined
        ? null
        : 'value must be a semantic version such as 1.2.3, v2.0.0 or 1.0.0-beta.1';
    case 'before':
    case 'after':
      return Number.isNaN(toComparableDate(value))
        ? 'value must be an ISO 8601 date (2024-05-01 or 2024-05-01T12:00:00Z) or epoch milliseconds'
        : null;
    case 'exists':
      return value === undefined || value === null || typeof value === 'boolean'
        ? null
        : 'value must be true, false or absent for exists';
    case 'in_cohort':
      // NUL: Postgres text cannot hold it, so no stored cohort has such an id.
      return typeof value === 'string' && value.length > 0 && value.length <= MAX_COHORT_ID_LENGTH && !value.includes('\u0000')
        ? null
        : `value must be a cohort id (a string of 1-${MAX_COHORT_ID_LENGTH} characters)`;
  }
}

/** Longest cohort id an in_cohort operand may name (ids are generated and far shorter). */
export const MAX_COHORT_ID_LENGTH = 128;

/** Why a cohort rule's condition cannot be in_cohort (also the write-time message). */
export const NESTED_COHORT_MESSAGE = 'in_cohort cannot be used inside a cohort: cohorts do not nest';

// ---------------------------------------------------------------------------------------------
// Compiled conditions

const OperatorCode = {
  Equals: 0,
  NotEquals: 1,
  In: 2,
  NotIn: 3,
  Contains: 4,
  StartsWith: 5,
  EndsWith: 6,
  Matches: 7,
  Gt: 8,
  Gte: 9,
  Lt: 10,
  Lte: 11,
  SemverEq: 12,
  SemverGt: 13,
  SemverLt: 14,
  Before: 15,
  After: 16,
  Exists: 17,
  InCohort: 18,
} as const;

type OperatorCode = (typeof OperatorCode)[keyof typeof OperatorCode];

const OPERATOR_CODES: Readonly<Record<Operator, OperatorCode>> = {
  equals: OperatorCode.Equals,
  not_equals: OperatorCode.NotEquals,
  in: OperatorCode.In,
  not_in: OperatorCode.NotIn,
  contains: OperatorCode.Contains,
  starts_with: OperatorCode.StartsWith,
  ends_with: OperatorCode.EndsWith,
  matches: OperatorCode.Matches,
  gt: OperatorCode.Gt,
  gte: OperatorCode.Gte,
  lt: OperatorCode.Lt,
  lte: OperatorCode.Lte,
  semver_eq: OperatorCode.SemverEq,
  semver_gt: OperatorCode.SemverGt,
  semver_lt: OperatorCode.SemverLt,
  before: OperatorCode.Before,
  after: OperatorCode.After,
  exists: OperatorCode.Exists,
  in_cohort: OperatorCode.InCohort,
};

/**
 * A validated condition with its operand parsed once. One class with every field set keeps
 * the objects monomorphic for the hot loop.
 */
export class CompiledCondition {
  constructor(
    readonly property: string,
    /** Segments of a dotted property, read when the context has no key of that exact name. */
    readonly path: readonly string[] | undefined,
    /** The property is also a member of Object.prototype (`constructor`, `__proto__`...). */
    readonly namesInheritedMember: boolean,
    readonly code: OperatorCode,
    readonly primitive: Primitive | undefined,
    readonly members: ReadonlySet<unknown> | undefined,
    readonly pattern: RegExp | undefined,
    readonly semver: Semver | undefined,
    /** Number for numeric comparisons, epoch milliseconds for date comparisons. */
    readonly bound: number,
    /** gt..lte compare dates instead of numbers. */
    readonly comparesDates: boolean,
    /** exists: whether the attribute must be present. */
    readonly expectsPresent: boolean,
    /** in_cohort: the cohort's compiled rules; undefined when the cohort was unknown at compile time (never holds). */
    readonly cohort: CompiledCohort | undefined,
    /** Condition units of the request's budget (budget.ts) one test costs, see conditionUnits. */
    readonly units: number,
  ) {}
}

/**
 * A cohort compiled into the in_cohort conditions that name it (compile.ts compileCohort): its
 * usable rules in order, each a list of conditions that must all hold.
 */
export class CompiledCohort {
  constructor(
    readonly id: string,
    readonly ruleIds: readonly string[],
    readonly rules: readonly (readonly CompiledCondition[])[],
    /** Condition units of testing every rule (budget.ts). */
    readonly units: number,
    /** Stored rules that could not be compiled and so never match, with the reason. */
    readonly issues: readonly string[],
  ) {}
}

/**
 * What one test of a condition costs in condition units, about the time of an `equals` on a
 * present attribute (10-30 ns): measured per operator on the longest inputs, date parsing
 * (no cache: each attribute is parsed again) about 40, a prefix or suffix comparison one per
 * four operand characters, each step of a dotted path two. `contains` pays for its search and
 * `matches` for its pattern when they run.
 */
function conditionUnits(operator: Operator, path: readonly string[] | undefined, value: unknown, comparesDates: boolean, cohort: CompiledCohort | undefined): number {
  let units = path === undefined ? 1 : 1 + 2 * path.length;
  switch (operator) {
    case 'in_cohort':
      units += cohort === undefined ? 0 : cohort.units;
      break;
    case 'before':
    case 'after':
      units += 40;
      break;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      units += comparesDates ? 40 : 6;
      break;
    case 'semver_eq':
    case 'semver_gt':
    case 'semver_lt':
      units += 2;
      break;
    case 'starts_with':
    case 'ends_with':
      units += Math.ceil((value as string).length / 4);
      break;
    default:
      break;
  }
  return units;
}

/**
 * Parses a condition's operand once; returns the validation message when it cannot be used.
 * `resolveCohort` gives an in_cohort condition its compiled cohort; without it (a cohort's own
 * rules) in_cohort cannot be compiled.
 */
export function compileCondition(condition: Condition, resolveCohort?: (id: string) => CompiledCohort | undefined): CompiledCondition | string {
  const problem = validateCondition(condition);
  if (problem !== null) return problem;
  const { property, value } = condition;
  const operator = condition.operator as Operator;
  const path = property.includes('.') ? property.split('.') : undefined;
  let primitive: Primitive | undefined;
  let members: ReadonlySet<unknown> | undefined;
  let pattern: RegExp | undefined;
  let semver: Semver | undefined;
  let bound = NaN;
  let comparesDates = false;
  let cohort: CompiledCohort | undefined;
  switch (operator) {
    case 'in_cohort':
      if (resolveCohort === undefined) return NESTED_COHORT_MESSAGE;
      cohort = resolveCohort(value as string);
      break;
    case 'in':
    case 'not_in':
      members = new Set(value as unknown[]);
      break;
    case 'matches':
      pattern = new RegExp(value as string);
      break;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      bound = toComparableNumber(value);
      if (Number.isNaN(bound)) {
        bound = parseIsoDate(value as string);
        comparesDates = true;
      }
      break;
    case 'semver_eq':
    case 'semver_gt':
    case 'semver_lt':
      semver = parseSemver(value as string);
      break;
    case 'before':
    case 'after':
      bound = toComparableDate(value);
      break;
    case 'equals':
    case 'not_equals':
    case 'contains':
    case 'starts_with':
    case 'ends_with':
      primitive = value as Primitive;
      break;
    case 'exists':
      break;
  }
  return new CompiledCondition(
    property,
    path,
    property in Object.prototype,
    OPERATOR_CODES[operator],
    primitive,
    members,
    pattern,
    semver,
    bound,
    comparesDates,
    value !== false,
    cohort,
    conditionUnits(operator, path, value, comparesDates, cohort),
  );
}

export function readAttribute(context: Record<string, unknown>, condition: CompiledCondition): unknown {
  const property = condition.property;
  // Contexts are plain JSON objects: only names that Object.prototype also has need the
  // slower own-property check to keep inherited members out.
  if (condition.namesInheritedMember ? Object.hasOwn(context, property) : context[property] !== undefined) {
    return context[property];
  }
  const path = condition.path;
  if (path === undefined) return undefined;
  let current: unknown = context;
  for (let i = 0; i < path.length; i++) {
    if (typeof current !== 'object' || current === null || !Object.hasOwn(current, path[i])) return undefined;
    current = (current as Record<string, unknown>)[path[i]];
  }
  return current;
}

/**
 * Whether the condition holds for the context; never throws. A pattern the request's budget
 * has no time left for does not run: the condition is false and the budget is exhausted.
 */
export function conditionHolds(condition: CompiledCondition, context: Record<string, unknown>, budget: EvaluationBudget | undefined): boolean {
  const attribute = readAttribute(context, condition);
  if (attribute === undefined || attribute === null) {
    // in_cohort does not depend on its property: it is decided here and in the switch below
    // rather than by a test before the read, which every other condition would pay for.
    if (condition.code === OperatorCode.InCohort) return cohortRuleMatched(condition.cohort, context, budget) >= 0;
    return condition.code === OperatorCode.Exists && !condition.expectsPresent;
  }
  switch (condition.code) {
    case OperatorCode.Exists:
      return condition.expectsPresent;
    case OperatorCode.Equals:
      return attribute === condition.primitive;
    case OperatorCode.NotEquals:
      return isPrimitive(attribute) && attribute !== condition.primitive;
    case OperatorCode.In:
      return isPrimitive(attribute) && condition.members!.has(attribute);
    case OperatorCode.NotIn:
      return isPrimitive(attribute) && !condition.members!.has(attribute);
    case OperatorCode.Contains:
      if (typeof attribute === 'string') {
        return typeof condition.primitive === 'string' && searchFits(budget, attribute.length) && attribute.includes(condition.primitive);
      }
      return Array.isArray(attribute) && searchFits(budget, attribute.length) && attribute.includes(condition.primitive);
    case OperatorCode.StartsWith:
      return typeof attribute === 'string' && attribute.startsWith(condition.primitive as string);
    case OperatorCode.EndsWith:
      return typeof attribute === 'string' && attribute.endsWith(condition.primitive as string);
    case OperatorCode.Matches:
      return (
        typeof attribute === 'string' &&
        attribute.length <= MAX_MATCH_INPUT_LENGTH &&
        (budget === undefined ? condition.pattern!.test(attribute) : budget.test(condition.pattern!, attribute))
      );
    case OperatorCode.Gt:
      return comparableFor(condition, attribute) > condition.bound;
    case OperatorCode.Gte:
      return comparableFor(condition, attribute) >= condition.bound;
    case OperatorCode.Lt:
      return comparableFor(condition, attribute) < condition.bound;
    case OperatorCode.Lte:
      return comparableFor(condition, attribute) <= condition.bound;
    case OperatorCode.SemverEq:
      return semverOrder(condition, attribute) === 0;
    case OperatorCode.SemverGt:
      return semverOrder(condition, attribute) > 0;
    case OperatorCode.SemverLt:
      return semverOrder(condition, attribute) < 0;
    case OperatorCode.Before:
      return toComparableDate(attribute) < condition.bound;
    case OperatorCode.After:
      return toComparableDate(attribute) > condition.bound;
    case OperatorCode.InCohort:
      return cohortRuleMatched(condition.cohort, context, budget) >= 0;
  }
}

/**
 * The index of the first cohort rule whose conditions all hold for the context, or -1 (also
 * for an unknown cohort). What in_cohort tests, and what cohort evaluate and explain report.
 */
export function cohortRuleMatched(cohort: CompiledCohort | undefined, context: Record<string, unknown>, budget: EvaluationBudget | undefined): number {
  if (cohort === undefined) return -1;
  const rules = cohort.rules;
  for (let i = 0; i < rules.length; i++) {
    const conditions = rules[i];
    let all = true;
    for (let j = 0; all && j < conditions.length; j++) all = conditionHolds(conditions[j], context, budget);
    if (all) return i;
  }
  return -1;
}

/** Characters or elements `contains` searches for one condition unit of the request's budget. */
const CONTAINS_SPAN = 16;

/** A search through a long string or array is many conditions' worth of work: it pays for the rest. */
function searchFits(budget: EvaluationBudget | undefined, length: number): boolean {
  return budget === undefined || length < CONTAINS_SPAN || budget.charge(Math.floor(length / CONTAINS_SPAN));
}

/** NaN (false in every comparison) when the attribute cannot be read as the operand's kind. */
function comparableFor(condition: CompiledCondition, attribute: unknown): number {
  return condition.comparesDates ? toComparableDate(attribute) : toComparableNumber(attribute);
}

// Contexts repeat a handful of app versions: parse each distinct string once. Cleared when
// full so memory stays bounded whatever clients send.
const ATTRIBUTE_VERSION_CACHE_LIMIT = 1024;
const attributeVersions = new Map<string, Semver | null>();

function attributeVersion(text: string): Semver | null {
  let version = attributeVersions.get(text);
  if (version === undefined) {
    version = parseSemver(text) ?? null;
    if (attributeVersions.size >= ATTRIBUTE_VERSION_CACHE_LIMIT) attributeVersions.clear();
    attributeVersions.set(text, version);
  }
  return version;
}

/** The attribute's order relative to the operand; NaN (never equal, greater or less) when not a version. */
function semverOrder(condition: CompiledCondition, attribute: unknown): number {
  if (typeof attribute !== 'string') return NaN;
  const version = attributeVersion(attribute);
  return version === null ? NaN : compareSemver(version, condition.semver!);
}
