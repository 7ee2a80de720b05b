/** The evaluation engine: pure functions from a stored flag and a context to a result. */
export {
  FLAG_TYPES,
  type CohortDefinition,
  type CohortLookup,
  type Condition,
  type ErrorCode,
  type EvaluationContext,
  type EvaluationResult,
  type FlagDefinition,
  type FlagType,
  type Reason,
  type RolloutSide,
  type TargetingRule,
  type Variant,
} from './types';
export {
  MAX_COHORT_ID_LENGTH,
  NESTED_COHORT_MESSAGE,
  OPERATORS,
  CompiledCohort,
  cohortRuleMatched,
  isOperator,
  validateCondition,
  type Operator,
} from './operators';
export { MAX_MATCHES_PER_FLAG, MAX_MATCH_INPUT_LENGTH, MAX_PATTERN_LENGTH, checkRegexSafety } from './regex-safety';
export { compareSemver, parseSemver, type Semver } from './semver';
export { BUCKET_COUNT, ROLLOUT_SALT, VARIANT_SALT, bucket, murmur3, rolloutThreshold } from './bucket';
export { compileCohort, compileFlag, type CompileIssue, type CompiledFlag, type CompiledRule, type CompiledVariant } from './compile';
export { evaluate, isInternedResult, perInternedResult, type EvaluateOptions, type EvaluationTracer } from './evaluate';
export { EvaluationBudget } from './budget';
export { valueMatchesType } from './value-types';
