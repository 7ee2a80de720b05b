/** The evaluation engine: pure functions from a stored flag and a context to a result. */
export {
  FLAG_TYPES,
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
export { OPERATORS, isOperator, validateCondition, type Operator } from './operators';
export { MAX_MATCHES_PER_FLAG, MAX_MATCH_INPUT_LENGTH, MAX_PATTERN_LENGTH, checkRegexSafety } from './regex-safety';
export { compareSemver, parseSemver, type Semver } from './semver';
export { BUCKET_COUNT, ROLLOUT_SALT, VARIANT_SALT, bucket, murmur3, rolloutThreshold } from './bucket';
export { compileFlag, type CompileIssue, type CompiledFlag, type CompiledRule, type CompiledVariant } from './compile';
export { evaluate, type EvaluateOptions, type EvaluationTracer } from './evaluate';
export { EvaluationBudget } from './budget';
export { valueMatchesType } from './value-types';
