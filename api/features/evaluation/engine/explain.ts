import { BUCKET_COUNT } from './bucket';
import type { CompiledFlag } from './compile';
import { evaluate, type EvaluationTracer } from './evaluate';
import { readAttribute } from './operators';
import type { ErrorCode, EvaluationContext, FlagDefinition, FlagType, Reason } from './types';

export interface ConditionExplanation {
  property: string;
  operator: string;
  expected: unknown;
  /** The context's value for the property (dotted paths read as evaluation reads them); undefined when absent. */
  actual: unknown;
  passed: boolean;
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
  /** Why a stored rule never matches (it could not be compiled). */
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
        actual: readAttribute(context, condition),
        passed,
      });
    },
    rule(ruleIndex) {
      const explained = ruleAt(ruleIndex);
      if (!compiled.rules[ruleIndex].usable) {
        const issue = compiled.issues.find((entry) => entry.ruleIndex === ruleIndex);
        explained.issue = issue === undefined ? 'rule could not be compiled' : issue.message;
      }
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
