import { BUCKET_COUNT } from './bucket';
import type { CompiledFlag } from './compile';
import { evaluate, type EvaluationTracer } from './evaluate';
import { cohortRuleMatched, readAttribute, type CompiledCondition } from './operators';
import type { ErrorCode, EvaluationContext, FlagDefinition, FlagType, Reason } from './types';

export interface ConditionExplanation {
  property: string;
  operator: string;
  expected: unknown;
  /**
   * The context's value for the property (dotted paths read as evaluation reads them); undefined
   * when absent. For in_cohort, which reads no property: the membership (CohortMembership).
   */
  actual: unknown;
  passed: boolean;
}

/** What an in_cohort condition found: the cohort rule that matched, as cohort evaluate reports it. */
export interface CohortMembership {
  cohortId: string;
  member: boolean;
  /** The first cohort rule whose conditions all held; null when none did or the cohort is unknown. */
  matchedRuleId: string | null;
}

export interface RolloutExplanation {
  percentage: number;
  /** The targeting key's rollout bucket on the same 0..100 scale; null without a targeting key. */
  bucket: number | null;
  included: boolean;
}

export interface RuleExplanation {
  id: string;
  matched: boolean;
  conditions: ConditionExplanation[];
  rollout?: RolloutExplanation;
  /** Why a stored rule never matches (it could not be compiled), or why part of it never holds (an unknown cohort). */
  issue?: string;
}

export interface Explanation {
  flagKey: string;
  value: unknown;
  reason: Reason;
  variant?: string;
  ruleId?: string;
  /** The bucket that decided, 0..100: the variant bucket for VARIANT, the rollout bucket of a matched partial rule. */
  bucket?: number;
  errorCode?: ErrorCode;
  errorMessage?: string;
  disabled?: boolean;
  /** Every rule evaluation reached, in order: the earlier ones that did not match, then the one that did. */
  rules: RuleExplanation[];
}

/** A flag as stored (operators and operands as written) and as compiled (what evaluation runs). */
export interface ExplainableFlag {
  definition: FlagDefinition;
  compiled: CompiledFlag;
}

const PERCENT_PER_BUCKET = 100 / BUCKET_COUNT;

/**
 * Runs `evaluate` itself with a tracer, so the explanation's value, reason, variant and rule
 * are the evaluation's by construction; the tracer only records why.
 */
export function explainFlag(
  flag: ExplainableFlag | undefined,
  flagKey: string,
  context: EvaluationContext,
  requestDefault: unknown,
  expectedType?: FlagType,
): Explanation {
  const rules: RuleExplanation[] = [];
  const variantBucket = { value: undefined as number | undefined };
  const tracer = flag === undefined ? undefined : tracerInto(flag, context, rules, variantBucket);
  const result = evaluate(flag?.compiled, flagKey, context, requestDefault, { expectedType, tracer });
  // The matched rule is the last one reached (evaluation stops there).
  const matched = result.ruleId === undefined ? undefined : rules[rules.length - 1];
  if (matched !== undefined) matched.matched = true;
  let bucket: number | undefined;
  if (result.reason === 'VARIANT' && variantBucket.value !== undefined) bucket = variantBucket.value * PERCENT_PER_BUCKET;
  else if (matched?.rollout?.bucket != null) bucket = matched.rollout.bucket;
  return {
    flagKey,
    value: result.value,
    reason: result.reason,
    variant: result.variant,
    ruleId: result.ruleId,
    bucket,
    errorCode: result.errorCode,
    errorMessage: result.errorMessage,
    disabled: result.disabled,
    rules,
  };
}

/** Records what evaluation reports into `rules` (in the order rules are reached) and the variant bucket. */
function tracerInto(
  flag: ExplainableFlag,
  context: EvaluationContext,
  rules: RuleExplanation[],
  variantBucket: { value: number | undefined },
): EvaluationTracer {
  const { compiled, definition } = flag;
  // Evaluation reports each rule's steps together and in rule order: the last entry is the current rule.
  let lastIndex = -1;
  const ruleAt = (index: number): RuleExplanation => {
    if (index !== lastIndex) {
      lastIndex = index;
      rules.push({ id: compiled.rules[index].id, matched: false, conditions: [] });
    }
    return rules[rules.length - 1];
  };
  return {
    condition(ruleIndex, conditionIndex, passed) {
      const condition = compiled.rules[ruleIndex].conditions[conditionIndex];
      const stored = definition.targeting[ruleIndex].conditions[conditionIndex];
      ruleAt(ruleIndex).conditions.push({
        property: stored.property,
        operator: stored.operator,
        expected: stored.value,
        actual: stored.operator === 'in_cohort' ? membership(condition, String(stored.value), context) : readAttribute(context, condition),
        passed,
      });
    },
    rule(ruleIndex) {
      const explained = ruleAt(ruleIndex);
      const issue = compiled.issues.find((entry) => entry.ruleIndex === ruleIndex);
      if (issue !== undefined) explained.issue = issue.message;
      else if (!compiled.rules[ruleIndex].usable) explained.issue = 'rule could not be compiled';
    },
    rollout(ruleIndex, bucket, included) {
      const percentage = definition.targeting[ruleIndex].rolloutPercentage;
      ruleAt(ruleIndex).rollout = {
        percentage: typeof percentage === 'number' ? percentage : 100,
        bucket: bucket === undefined ? null : bucket * PERCENT_PER_BUCKET,
        included,
      };
    },
    variant(bucket) {
      variantBucket.value = bucket;
    },
  };
}

/** The cohort rule an in_cohort condition matched: the same test evaluation ran (pure, so it agrees). */
function membership(condition: CompiledCondition, cohortId: string, context: EvaluationContext): CohortMembership {
  const index = cohortRuleMatched(condition.cohort, context, undefined);
  return { cohortId, member: index >= 0, matchedRuleId: index >= 0 ? condition.cohort!.ruleIds[index] : null };
}
