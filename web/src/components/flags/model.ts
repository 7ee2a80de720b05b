/**
 * The flags area's shapes and conversions: the API's flag record (docs/api-reference.md#flags), the
 * operators the evaluation engine supports (api/features/evaluation/engine/operators.ts), and the
 * drafts the editors keep (text as typed) with their conversion to API values, which says what is
 * wrong in words fit to show beside the input.
 */
import type { paths } from '../../api/client';

export type FlagRecord = paths['/api/flags/{key}']['get']['responses'][200]['content']['application/json'];
export { ENVIRONMENTS, isEnvironment, type Environment } from '../../api/environments';
export type FlagType = FlagRecord['type'];
type ApiRule = FlagRecord['targeting'][number];
type ApiVariant = FlagRecord['variants'][number];
export type Simulation = paths['/api/flags/{key}/simulate']['post']['responses'][200]['content']['application/json'];
export type Cohort = paths['/api/projects/{id}/cohorts']['get']['responses'][200]['content']['application/json']['cohorts'][number];

export const FLAG_TYPES: FlagType[] = ['boolean', 'string', 'number', 'object'];

/** How an operator's operand is entered. */
type OperandKind = 'scalar' | 'list' | 'text' | 'pattern' | 'ordered' | 'semver' | 'date' | 'exists' | 'cohort';

/** Every operator of the engine, with the words the editor shows and how its operand is typed. */
export const OPERATORS = [
  { name: 'equals', label: 'equals', kind: 'scalar' },
  { name: 'not_equals', label: 'does not equal', kind: 'scalar' },
  { name: 'in', label: 'is one of', kind: 'list' },
  { name: 'not_in', label: 'is not one of', kind: 'list' },
  { name: 'contains', label: 'contains', kind: 'scalar' },
  { name: 'starts_with', label: 'starts with', kind: 'text' },
  { name: 'ends_with', label: 'ends with', kind: 'text' },
  { name: 'matches', label: 'matches the pattern', kind: 'pattern' },
  { name: 'gt', label: 'is greater than', kind: 'ordered' },
  { name: 'gte', label: 'is at least', kind: 'ordered' },
  { name: 'lt', label: 'is less than', kind: 'ordered' },
  { name: 'lte', label: 'is at most', kind: 'ordered' },
  { name: 'semver_eq', label: 'is version', kind: 'semver' },
  { name: 'semver_gt', label: 'is a version after', kind: 'semver' },
  { name: 'semver_lt', label: 'is a version before', kind: 'semver' },
  { name: 'before', label: 'is a date before', kind: 'date' },
  { name: 'after', label: 'is a date after', kind: 'date' },
  { name: 'exists', label: 'is present', kind: 'exists' },
  { name: 'in_cohort', label: 'is in the cohort', kind: 'cohort' },
] as const satisfies readonly { name: string; label: string; kind: OperandKind }[];

export type Operator = (typeof OPERATORS)[number]['name'];

export function operandKind(operator: string): OperandKind {
  return OPERATORS.find((o) => o.name === operator)?.kind ?? 'scalar';
}

/** equals, in, contains... are type-strict ("5" is not 5): the editor asks which type is meant. */
export type ScalarType = 'string' | 'number' | 'boolean';

/** A condition as the editor holds it: the operand as typed. */
export interface DraftCondition {
  key: string;
  property: string;
  operator: string;
  /** The operand as text (a list: comma-separated); for exists "true"/"false"; for in_cohort the cohort id. */
  text: string;
  scalarType: ScalarType;
  /** A stored condition's operand as the API gave it: sent back as is while its inputs are untouched (`exists` without a value stays so). */
  stored?: { operator: string; text: string; scalarType: ScalarType; value: unknown };
}

/** A rule as the editor holds it; `id` is the stored rule's (new rules get one when saved). */
export interface DraftRule {
  key: string;
  id?: string;
  conditions: DraftCondition[];
  valueText: string;
  /** Undefined: the rule has no rolloutPercentage (everyone matching gets it). */
  rollout?: number;
}

export interface DraftVariant {
  key: string;
  name: string;
  valueText: string;
  weightText: string;
}

let nextKey = 0;
/** React keys for draft rows (stable across reorders). */
export const draftKey = () => `d${++nextKey}`;

function scalarTypeOf(value: unknown): ScalarType {
  return typeof value === 'number' ? 'number' : typeof value === 'boolean' ? 'boolean' : 'string';
}

function toDraftCondition(condition: ApiRule['conditions'][number]): DraftCondition {
  const { value } = condition;
  const kind = operandKind(condition.operator);
  let text: string;
  let scalarType: ScalarType = 'string';
  if (kind === 'list' && Array.isArray(value)) {
    text = value.map(String).join(', ');
    scalarType = scalarTypeOf(value[0]);
  } else if (kind === 'exists') {
    text = value === false ? 'false' : 'true';
  } else {
    text = value === undefined || value === null ? '' : String(value);
    scalarType = scalarTypeOf(value);
  }
  return { key: draftKey(), property: condition.property, operator: condition.operator, text, scalarType, stored: { operator: condition.operator, text, scalarType, value } };
}

function untouched(condition: DraftCondition): boolean {
  const { stored } = condition;
  return !!stored && stored.operator === condition.operator && stored.text === condition.text && stored.scalarType === condition.scalarType;
}

export function newCondition(): DraftCondition {
  return { key: draftKey(), property: '', operator: 'equals', text: '', scalarType: 'string' };
}

export function toDraftRule(rule: ApiRule, type: FlagType): DraftRule {
  return {
    key: draftKey(),
    id: rule.id,
    conditions: rule.conditions.map(toDraftCondition),
    valueText: formatValue(type, rule.value),
    rollout: rule.rolloutPercentage,
  };
}

export function newRule(type: FlagType): DraftRule {
  return { key: draftKey(), conditions: [newCondition()], valueText: formatValue(type, defaultFor(type, true)), rollout: undefined };
}

export function toDraftVariant(variant: ApiVariant, type: FlagType): DraftVariant {
  return { key: draftKey(), name: variant.name, valueText: formatValue(type, variant.value), weightText: String(variant.weight) };
}

/** The value a new rule or flag starts with: `true` for a rule of a boolean flag (it usually turns something on). */
export function defaultFor(type: FlagType, forRule = false): unknown {
  switch (type) {
    case 'boolean':
      return forRule;
    case 'string':
      return '';
    case 'number':
      return 0;
    case 'object':
      return {};
  }
}

/** A flag value as the value input shows it. */
export function formatValue(type: FlagType, value: unknown): string {
  if (value === undefined) return '';
  if (type === 'object') return JSON.stringify(value, null, 2);
  return String(value);
}

type Parsed<T> = { ok: true; value: T } | { ok: false; problem: string };

/** A value typed in a value input, read as the flag's type. */
export function parseValue(type: FlagType, text: string): Parsed<unknown> {
  switch (type) {
    case 'boolean':
      return text === 'true' || text === 'false' ? { ok: true, value: text === 'true' } : { ok: false, problem: 'choose true or false' };
    case 'string':
      return { ok: true, value: text };
    case 'number': {
      const n = Number(text);
      return text.trim() !== '' && Number.isFinite(n) ? { ok: true, value: n } : { ok: false, problem: 'enter a number' };
    }
    case 'object':
      try {
        const value: unknown = JSON.parse(text);
        return value !== null && typeof value === 'object' ? { ok: true, value } : { ok: false, problem: 'enter a JSON object or array' };
      } catch {
        return { ok: false, problem: 'not valid JSON' };
      }
  }
}

function parseScalar(text: string, type: ScalarType): Parsed<string | number | boolean> {
  if (type === 'number') {
    const n = Number(text);
    return text.trim() !== '' && Number.isFinite(n) ? { ok: true, value: n } : { ok: false, problem: `"${text}" is not a number` };
  }
  if (type === 'boolean') return text === 'true' || text === 'false' ? { ok: true, value: text === 'true' } : { ok: false, problem: 'choose true or false' };
  return { ok: true, value: text };
}

const NUMERIC = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

/** A condition's operand as the API takes it; the engine's write-time checks still apply on the server. */
function parseOperand(condition: DraftCondition): Parsed<unknown> {
  const text = condition.text;
  switch (operandKind(condition.operator)) {
    case 'scalar':
      return parseScalar(text, condition.scalarType);
    case 'list': {
      const items = text.split(',').map((s) => s.trim()).filter(Boolean);
      if (!items.length) return { ok: false, problem: 'enter at least one value (comma-separated)' };
      const values: unknown[] = [];
      for (const item of items) {
        const parsed = parseScalar(item, condition.scalarType);
        if (!parsed.ok) return parsed;
        values.push(parsed.value);
      }
      return { ok: true, value: values };
    }
    case 'ordered':
      // A number compares numerically; anything else is sent as an ISO date string.
      if (!text.trim()) return { ok: false, problem: 'enter a number or an ISO 8601 date' };
      return { ok: true, value: NUMERIC.test(text.trim()) ? Number(text) : text.trim() };
    case 'exists':
      return { ok: true, value: text !== 'false' };
    case 'cohort':
      return text ? { ok: true, value: text } : { ok: false, problem: 'choose a cohort' };
    case 'text':
    case 'pattern':
    case 'semver':
    case 'date':
      return text.trim() ? { ok: true, value: text.trim() } : { ok: false, problem: 'enter a value' };
  }
}

interface RuleProblems {
  /** "rule 1, condition 2: enter a number" */
  messages: string[];
  /** Per draft key (condition or rule value or variant): the problem, shown beside its input. */
  byKey: Map<string, string>;
}

/** The API's targeting from the drafts, or what must be fixed first. */
export function targetingFromDrafts(rules: DraftRule[], type: FlagType): Parsed<ApiRuleInput[]> & { problems: RuleProblems } {
  const problems: RuleProblems = { messages: [], byKey: new Map() };
  const out: ApiRuleInput[] = [];
  rules.forEach((rule, i) => {
    const conditions: ApiRule['conditions'] = [];
    rule.conditions.forEach((condition, j) => {
      // in_cohort reads no attribute: by convention targetingKey (a stored one keeps its own).
      const cohortProperty = condition.stored?.operator === 'in_cohort' ? condition.property : 'targetingKey';
      const property = operandKind(condition.operator) === 'cohort' ? cohortProperty : condition.property.trim();
      if (!property) {
        problems.byKey.set(`${condition.key}:property`, 'enter an attribute');
        problems.messages.push(`Rule ${i + 1}, condition ${j + 1}: enter an attribute`);
      }
      const operand: Parsed<unknown> = untouched(condition) ? { ok: true, value: condition.stored!.value } : parseOperand(condition);
      if (!operand.ok) {
        problems.byKey.set(condition.key, operand.problem);
        problems.messages.push(`Rule ${i + 1}, condition ${j + 1}: ${operand.problem}`);
      } else conditions.push({ property, operator: condition.operator as Operator, ...(operand.value !== undefined ? { value: operand.value } : {}) });
    });
    const value = parseValue(type, rule.valueText);
    if (!value.ok) {
      problems.byKey.set(rule.key, value.problem);
      problems.messages.push(`Rule ${i + 1}, served value: ${value.problem}`);
    }
    out.push({
      ...(rule.id ? { id: rule.id } : {}),
      conditions,
      value: value.ok ? value.value : undefined,
      ...(rule.rollout !== undefined ? { rolloutPercentage: rule.rollout } : {}),
    });
  });
  return problems.messages.length ? { ok: false, problem: problems.messages.join('; '), problems } : { ok: true, value: out, problems };
}

type ApiRuleInput = Omit<ApiRule, 'id'> & { id?: string };

/** Weights must sum to 100 (the API's rule, checked here first with the same tolerance). */
export function variantsFromDrafts(variants: DraftVariant[], type: FlagType): Parsed<ApiVariant[]> & { byKey: Map<string, string>; total: number } {
  const byKey = new Map<string, string>();
  const out: ApiVariant[] = [];
  let total = 0;
  for (const variant of variants) {
    const value = parseValue(type, variant.valueText);
    const weight = Number(variant.weightText);
    if (!variant.name.trim()) byKey.set(`${variant.key}:name`, 'enter a name');
    if (!value.ok) byKey.set(`${variant.key}:value`, value.problem);
    if (variant.weightText.trim() === '' || !Number.isFinite(weight) || weight < 0 || weight > 100) byKey.set(`${variant.key}:weight`, 'a number from 0 to 100');
    else total += weight;
    out.push({ name: variant.name.trim(), value: value.ok ? value.value : undefined, weight });
  }
  total = Number(total.toFixed(6));
  if (byKey.size) return { ok: false, problem: 'Fix the marked variant fields.', byKey, total };
  if (variants.length && Math.abs(total - 100) > 1e-6) {
    return { ok: false, problem: `Variant weights must sum to 100; they sum to ${total}.`, byKey, total };
  }
  return { ok: true, value: out, byKey, total };
}

/** JSON with sorted object keys, so a field is "changed" only when its content is. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

export function parseTags(text: string): string[] {
  return [...new Set(text.split(',').map((t) => t.trim()).filter(Boolean))];
}

/** A value for display in tables and simulation results. */
export function showValue(value: unknown): string {
  return value === undefined ? '—' : JSON.stringify(value);
}

/** Query string of a flag's own pages: the flag is identified by service and environment too. */
export { flagHref } from '../../links';
