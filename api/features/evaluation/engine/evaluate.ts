import { BUCKET_COUNT, bucketWithPrefix } from './bucket';
import { BUDGET_EXHAUSTED_MESSAGE, type EvaluationBudget } from './budget';
import type { CompiledFlag, CompiledVariant } from './compile';
import { conditionHolds, type CompiledCondition } from './operators';
import type { ErrorCode, EvaluationContext, EvaluationResult, FlagType, Reason, RolloutSide } from './types';
import { typeOfValue, valueMatchesType } from './value-types';

// Bound once at load: under esbuild (tsx) every use of an imported binding is a getter call,
// which shows in this hot path's profile.
const FULL_ROLLOUT = BUCKET_COUNT;
const bucketOf = bucketWithPrefix;
const holds = conditionHolds;
const isOfType = valueMatchesType;

export interface EvaluateOptions {
  /** The type the caller asked for (typed endpoints); a value of another type is a TYPE_MISMATCH. */
  expectedType?: FlagType;
  /** The request's work budget (budget.ts), shared by every flag it evaluates. */
  budget?: EvaluationBudget;
  /** Told every step that decides the result (explain.ts); absent on the serving path. */
  tracer?: EvaluationTracer;
}

/**
 * What `evaluate` reports while it decides, so an explanation comes from the very code that
 * serves values. With a tracer every condition of a rule runs (no short cut at the first
 * false one), which changes no outcome: conditions are pure.
 */
export interface EvaluationTracer {
  /** Condition `conditionIndex` of rule `ruleIndex` was checked. */
  condition(ruleIndex: number, conditionIndex: number, passed: boolean): void;
  /** Rule `ruleIndex` was reached; `conditionsHeld` is false for a rule that could not compile. */
  rule(ruleIndex: number, conditionsHeld: boolean): void;
  /** The rule's conditions held and its rollout is partial; `bucket` is undefined without a targeting key. */
  rollout(ruleIndex: number, bucket: number | undefined, included: boolean): void;
  /** The variants decided, with the key's variant bucket. */
  variant(bucket: number, name: string): void;
}

/**
 * Evaluates a compiled flag for a context, in the order of docs/evaluation.md#evaluation-order:
 * 1. no flag: the request's default, ERROR, FLAG_NOT_FOUND;
 * 2. flag disabled: the flag's defaultValue, DEFAULT, `disabled: true`;
 * 3. first rule whose conditions all hold and whose rollout holds the targeting key: the
 *    rule's value, TARGETING_MATCH, `ruleId` (a partial rollout never holds a context without
 *    a targeting key); `rolloutSide` says which side of a partial rollout decided (types.ts);
 * 4. variants with a positive total weight: the variant at the key's variant bucket, VARIANT
 *    (a context without a targeting key gets the request's default, ERROR,
 *    TARGETING_KEY_MISSING, since there is nothing to bucket);
 * 5. otherwise the flag's defaultValue, DEFAULT.
 * A value that is not of the flag's declared type, or of `expectedType` when given, becomes
 * the request's default with ERROR and TYPE_MISMATCH. A context that is not an object is
 * INVALID_CONTEXT. A targeting key that is not a non-empty string counts as missing.
 * When `budget` cannot pay for the flag (its conditions, then each pattern it runs), the result
 * is the request's default with ERROR and GENERAL. Never throws.
 */
export function evaluate(
  flag: CompiledFlag | undefined,
  flagKey: string,
  context: EvaluationContext,
  requestDefault: unknown,
  opts?: EvaluateOptions,
): EvaluationResult {
  if (flag === undefined) {
    return errorResult(flagKey, requestDefault, 'FLAG_NOT_FOUND', `flag "${flagKey}" not found`);
  }
  const expectedType = opts === undefined ? undefined : opts.expectedType;
  const budget = opts === undefined ? undefined : opts.budget;
  const tracer = opts === undefined ? undefined : opts.tracer;
  if (budget !== undefined && !budget.charge(flag.cost)) {
    return errorResult(flagKey, requestDefault, 'GENERAL', BUDGET_EXHAUSTED_MESSAGE);
  }
  if (!flag.enabled) {
    return typedResult(flag, flag, flagKey, flag.defaultValue, 'DEFAULT', undefined, undefined, true, requestDefault, expectedType);
  }
  if (typeof context !== 'object' || context === null || Array.isArray(context)) {
    return errorResult(flagKey, requestDefault, 'INVALID_CONTEXT', 'context must be an object');
  }
  const rawKey = Object.hasOwn(context, 'targetingKey') ? context.targetingKey : undefined;
  const targetingKey = typeof rawKey === 'string' && rawKey.length > 0 ? rawKey : undefined;

  const rules = flag.rules;
  let rolloutBucket = -1;
  // The first rule whose conditions held but whose partial rollout left the key out: it
  // decided the caller is in its control cohort, whatever serves the value afterwards.
  let outOfRolloutRuleId: string | undefined;
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i];
    const held =
      rule.usable &&
      (tracer === undefined ? allConditionsHold(rule.conditions, context, budget) : traceConditions(i, rule.conditions, context, budget, tracer));
    if (tracer !== undefined) tracer.rule(i, held);
    if (!held) {
      // A pattern that did not run may have matched: no later rule can be trusted.
      if (budget !== undefined && budget.exhausted) return errorResult(flagKey, requestDefault, 'GENERAL', BUDGET_EXHAUSTED_MESSAGE);
      continue;
    }
    const partial = rule.rolloutThreshold < FULL_ROLLOUT;
    if (partial) {
      if (targetingKey === undefined) {
        if (tracer !== undefined) tracer.rollout(i, undefined, false);
        continue;
      }
      if (rolloutBucket < 0) rolloutBucket = bucketOf(flag.rolloutPrefix, targetingKey);
      if (tracer !== undefined) tracer.rollout(i, rolloutBucket, rolloutBucket < rule.rolloutThreshold);
      if (rolloutBucket >= rule.rolloutThreshold) {
        outOfRolloutRuleId ??= rule.id;
        continue;
      }
    }
    if (outOfRolloutRuleId !== undefined) {
      return typedResult(rule, flag, flagKey, rule.value, 'TARGETING_MATCH', undefined, rule.id, undefined, requestDefault, expectedType, 'out', outOfRolloutRuleId);
    }
    return typedResult(rule, flag, flagKey, rule.value, 'TARGETING_MATCH', undefined, rule.id, undefined, requestDefault, expectedType, partial ? 'in' : undefined, partial ? rule.id : undefined);
  }
  const side = outOfRolloutRuleId === undefined ? undefined : 'out';

  if (flag.variants.length > 0) {
    if (targetingKey === undefined) {
      return errorResult(flagKey, requestDefault, 'TARGETING_KEY_MISSING', 'variants need a targetingKey in the context');
    }
    const variantBucket = bucketOf(flag.variantPrefix, targetingKey);
    const variant = variantAt(flag, variantBucket);
    if (tracer !== undefined) tracer.variant(variantBucket, variant.name);
    return typedResult(variant, flag, flagKey, variant.value, 'VARIANT', variant.name, undefined, undefined, requestDefault, expectedType, side, outOfRolloutRuleId);
  }

  return typedResult(flag, flag, flagKey, flag.defaultValue, 'DEFAULT', undefined, undefined, undefined, requestDefault, expectedType, side, outOfRolloutRuleId);
}

function allConditionsHold(
  conditions: readonly CompiledCondition[],
  context: Record<string, unknown>,
  budget: EvaluationBudget | undefined,
): boolean {
  for (let i = 0; i < conditions.length; i++) {
    if (!holds(conditions[i], context, budget)) return false;
  }
  return true;
}

/** allConditionsHold for explain: runs and reports every condition. */
function traceConditions(
  ruleIndex: number,
  conditions: readonly CompiledCondition[],
  context: Record<string, unknown>,
  budget: EvaluationBudget | undefined,
  tracer: EvaluationTracer,
): boolean {
  let all = true;
  for (let i = 0; i < conditions.length; i++) {
    const passed = holds(conditions[i], context, budget);
    tracer.condition(ruleIndex, i, passed);
    all &&= passed;
  }
  return all;
}

/** The variant whose share of the cumulated weights contains the bucket's point. */
function variantAt(flag: CompiledFlag, bucket: number): CompiledVariant {
  const variants = flag.variants;
  const point = (bucket / FULL_ROLLOUT) * flag.totalVariantWeight;
  for (let i = 0; i < variants.length - 1; i++) {
    if (point < variants[i].cumulativeWeight) return variants[i];
  }
  return variants[variants.length - 1];
}

/**
 * Successful results are interned: every caller served by the same rule, variant or default of
 * the same compiled flag (and left out of the same rule's rollout) gets the same frozen object.
 * A bulk answer then allocates nothing per flag, and what the adapters derive from a result
 * (its OFREP JSON in ofrep.ts, its part of the recorder's folding key) is computed once per
 * flag version instead of once per request. Keyed by the serving object, so a recompiled flag
 * starts afresh and the old results go with the old flag.
 */
const interned = new WeakMap<object, InternedResults>();
const internedResults = new WeakSet<EvaluationResult>();

/**
 * `derive` of a result, kept for interned results (what the adapters build from one: its JSON
 * entry, the recorder's key part) and computed each time for the others (errors carry the
 * caller's default). A recompiled flag's new results start afresh. `args` only feed the first
 * derivation: they must not change what it gives for an interned result.
 */
export function perInternedResult<A extends unknown[], T>(derive: (r: EvaluationResult, ...args: A) => T): (r: EvaluationResult, ...args: A) => T {
  const kept = new WeakMap<EvaluationResult, T>();
  return (r, ...args) => {
    let value = kept.get(r);
    if (value === undefined) {
      value = derive(r, ...args);
      if (internedResults.has(r)) kept.set(r, value);
    }
    return value;
  };
}

/** Whether `r` is an interned result (the same object for every caller served alike). */
export function isInternedResult(r: EvaluationResult): boolean {
  return internedResults.has(r);
}

interface InternedResults {
  plain?: EvaluationResult;
  in?: EvaluationResult;
  disabled?: EvaluationResult;
  /** By the rule whose partial rollout left the key out. */
  out: Map<string, EvaluationResult>;
}

function typedResult(
  /** What served the value: the rule, the variant, or the flag (default or disabled). */
  owner: object,
  flag: CompiledFlag,
  flagKey: string,
  value: unknown,
  reason: Reason,
  variant: string | undefined,
  ruleId: string | undefined,
  disabled: true | undefined,
  requestDefault: unknown,
  expectedType: FlagType | undefined,
  rolloutSide?: RolloutSide,
  rolloutRuleId?: string,
): EvaluationResult {
  // A mismatch keeps the rollout side: an error the canaried value causes counts for its cohort.
  if (!isOfType(flag.type, value)) {
    return errorResult(flagKey, requestDefault, 'TYPE_MISMATCH', mismatchMessage(value, flag.type, 'the flag type'), rolloutSide, rolloutRuleId);
  }
  if (expectedType !== undefined && !isOfType(expectedType, value)) {
    return errorResult(flagKey, requestDefault, 'TYPE_MISMATCH', mismatchMessage(value, expectedType, 'the requested type'), rolloutSide, rolloutRuleId);
  }
  let slots = interned.get(owner);
  if (slots === undefined) {
    slots = { out: new Map() };
    interned.set(owner, slots);
  }
  const known = disabled ? slots.disabled : rolloutSide === undefined ? slots.plain : rolloutSide === 'in' ? slots.in : slots.out.get(rolloutRuleId!);
  if (known !== undefined && known.flagKey === flagKey) return known;
  const result: EvaluationResult = Object.freeze({
    flagKey,
    value,
    reason,
    variant,
    errorCode: undefined,
    errorMessage: undefined,
    disabled,
    ruleId,
    rolloutSide,
    rolloutRuleId,
  });
  internedResults.add(result);
  if (disabled) slots.disabled = result;
  else if (rolloutSide === undefined) slots.plain = result;
  else if (rolloutSide === 'in') slots.in = result;
  else slots.out.set(rolloutRuleId!, result);
  return result;
}

function mismatchMessage(value: unknown, type: string, what: string): string {
  return `value of type ${typeOfValue(value) ?? String(value)} does not match ${what} ${type}`;
}

function errorResult(
  flagKey: string,
  requestDefault: unknown,
  errorCode: ErrorCode,
  errorMessage: string,
  rolloutSide?: RolloutSide,
  rolloutRuleId?: string,
): EvaluationResult {
  return {
    flagKey,
    value: requestDefault,
    reason: 'ERROR',
    variant: undefined,
    errorCode,
    errorMessage,
    disabled: undefined,
    ruleId: undefined,
    rolloutSide,
    rolloutRuleId,
  };
}
