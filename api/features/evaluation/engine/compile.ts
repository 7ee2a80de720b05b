import { BUCKET_COUNT, ROLLOUT_SALT, VARIANT_SALT, createBucketPrefix, rolloutThreshold, type BucketPrefix } from './bucket';
import { CompiledCohort, compileCondition, type CompiledCondition } from './operators';
import type { CohortDefinition, CohortLookup, Condition, FlagDefinition, FlagType } from './types';

/** Why part of a stored flag was set aside at compile time; the flag itself still evaluates. */
export interface CompileIssue {
  /** Index in `targeting`, or undefined for a problem with the variants. */
  ruleIndex: number | undefined;
  ruleId: string | undefined;
  message: string;
}

export interface CompiledRule {
  readonly id: string;
  readonly conditions: readonly CompiledCondition[];
  readonly value: unknown;
  /** Keys whose rollout bucket is below this are inside the rollout; BUCKET_COUNT means everyone. */
  readonly rolloutThreshold: number;
  /** False when the stored rule could not be compiled: it never matches. */
  readonly usable: boolean;
}

export interface CompiledVariant {
  readonly name: string;
  readonly value: unknown;
  /** Sum of the weights of this variant and all before it. */
  readonly cumulativeWeight: number;
}

export interface CompiledFlag {
  readonly key: string;
  readonly type: FlagType;
  readonly enabled: boolean;
  readonly defaultValue: unknown;
  readonly rules: readonly CompiledRule[];
  /** Empty unless the stored variants have a positive total weight. */
  readonly variants: readonly CompiledVariant[];
  readonly totalVariantWeight: number;
  readonly rolloutPrefix: BucketPrefix;
  readonly variantPrefix: BucketPrefix;
  /** Condition units one evaluation charges to the request's budget (budget.ts): one plus every condition's. */
  readonly cost: number;
  readonly issues: readonly CompileIssue[];
  /** Ids of the cohorts its in_cohort conditions name (known or not), sorted: what a cohort change recompiles. */
  readonly cohortIds: readonly string[];
}

const NO_COHORTS: readonly string[] = Object.freeze([]);
const NO_LOOKUP: CohortLookup = new Map();

/**
 * Prepares a stored flag for evaluation: operands parsed, regexes compiled, weights cumulated,
 * and the rules of every cohort an in_cohort condition names (looked up in `cohorts`, the
 * flag's project's) compiled into that condition, so evaluation needs nothing else.
 * Never throws: a rule that cannot compile is kept as never-matching and reported in `issues`;
 * malformed variants are ignored the same way; an in_cohort condition naming a cohort missing
 * from `cohorts` never holds and is reported too.
 */
export function compileFlag(definition: FlagDefinition, cohorts: CohortLookup = NO_LOOKUP): CompiledFlag {
  const issues: CompileIssue[] = [];
  const key = typeof definition.key === 'string' ? definition.key : String(definition.key);
  const targeting: unknown[] = Array.isArray(definition.targeting) ? definition.targeting : [];
  // Each named cohort is compiled once per flag, however many conditions name it.
  const named = new Map<string, CompiledCohort | undefined>();
  const resolverFor = (index: number, ruleId: string) => (id: string) => {
    if (!named.has(id)) {
      const definition = cohorts.get(id);
      named.set(id, definition === undefined ? undefined : compileCohort(definition));
    }
    const cohort = named.get(id);
    if (cohort === undefined) issues.push({ ruleIndex: index, ruleId, message: `cohort ${JSON.stringify(id)} does not exist: its in_cohort condition never holds` });
    else for (const problem of cohort.issues) issues.push({ ruleIndex: index, ruleId, message: `cohort ${JSON.stringify(id)}: ${problem}` });
    return cohort;
  };
  const rules = targeting.map((rule, index) => compileRule(rule, index, issues, resolverFor));
  const { variants, totalWeight } = compileVariants(definition.variants, issues);
  let units = 0;
  for (const rule of rules) for (const condition of rule.conditions) units += condition.units;
  return {
    key,
    type: definition.type,
    enabled: definition.enabled === true,
    defaultValue: definition.defaultValue,
    rules,
    variants,
    totalVariantWeight: totalWeight,
    rolloutPrefix: createBucketPrefix(ROLLOUT_SALT, key),
    variantPrefix: createBucketPrefix(VARIANT_SALT, key),
    cost: 1 + units,
    issues,
    cohortIds: named.size === 0 ? NO_COHORTS : [...named.keys()].sort(),
  };
}

/**
 * Compiles a cohort's rules (docs/cohorts.md: a member when any rule's conditions all hold). A rule
 * that cannot compile, in_cohort included (cohorts do not nest), never matches and is named in
 * `issues`.
 */
export function compileCohort(definition: CohortDefinition): CompiledCohort {
  const ruleIds: string[] = [];
  const rules: CompiledCondition[][] = [];
  const issues: string[] = [];
  let units = 0;
  const stored: unknown[] = Array.isArray(definition.rules) ? definition.rules : [];
  stored.forEach((entry, index) => {
    const rule = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
    const id = typeof rule.id === 'string' ? rule.id : String(index);
    if (!Array.isArray(rule.conditions)) {
      issues.push(`rule ${JSON.stringify(id)} never matches: conditions must be an array`);
      return;
    }
    const conditions: CompiledCondition[] = [];
    for (const condition of rule.conditions as Condition[]) {
      const compiled = compileCondition(condition);
      if (typeof compiled === 'string') {
        issues.push(`rule ${JSON.stringify(id)} never matches: ${compiled}`);
        return;
      }
      conditions.push(compiled);
      units += compiled.units;
    }
    ruleIds.push(id);
    rules.push(conditions);
  });
  return new CompiledCohort(String(definition.id), ruleIds, rules, units, issues);
}

function compileRule(
  stored: unknown,
  index: number,
  issues: CompileIssue[],
  resolverFor: (index: number, ruleId: string) => (id: string) => CompiledCohort | undefined,
): CompiledRule {
  const rule = (typeof stored === 'object' && stored !== null ? stored : {}) as Record<string, unknown>;
  const id = typeof rule.id === 'string' ? rule.id : String(index);
  const unusable = (message: string): CompiledRule => {
    issues.push({ ruleIndex: index, ruleId: id, message });
    return { id, conditions: [], value: rule.value, rolloutThreshold: 0, usable: false };
  };
  if (stored !== rule) return unusable('rule must be an object');
  if (!Array.isArray(rule.conditions)) return unusable('conditions must be an array');
  const conditions: CompiledCondition[] = [];
  const resolveCohort = resolverFor(index, id);
  for (const condition of rule.conditions as Condition[]) {
    const compiled = compileCondition(condition, resolveCohort);
    if (typeof compiled === 'string') return unusable(compiled);
    conditions.push(compiled);
  }
  const percentage = rule.rolloutPercentage;
  let threshold = BUCKET_COUNT;
  if (percentage !== undefined && percentage !== null) {
    if (typeof percentage !== 'number' || !Number.isFinite(percentage)) {
      return unusable('rolloutPercentage must be a number');
    }
    threshold = rolloutThreshold(percentage);
  }
  return { id, conditions, value: rule.value, rolloutThreshold: threshold, usable: true };
}

function compileVariants(
  stored: unknown,
  issues: CompileIssue[],
): { variants: CompiledVariant[]; totalWeight: number } {
  if (!Array.isArray(stored)) return { variants: [], totalWeight: 0 };
  const variants: CompiledVariant[] = [];
  let totalWeight = 0;
  for (const entry of stored as unknown[]) {
    const variant = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
    const { name, weight } = variant;
    if (typeof name !== 'string' || typeof weight !== 'number' || !Number.isFinite(weight) || weight < 0) {
      issues.push({
        ruleIndex: undefined,
        ruleId: undefined,
        message: `variant ${JSON.stringify(name)} ignored: needs a string name and a finite, non-negative weight`,
      });
      continue;
    }
    totalWeight += weight;
    variants.push({ name, value: variant.value, cumulativeWeight: totalWeight });
  }
  return totalWeight > 0 ? { variants, totalWeight } : { variants: [], totalWeight: 0 };
}
