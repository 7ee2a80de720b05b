/**
 * Shapes shared by the evaluation engine and its protocol adapters (REST, OFREP, Connect).
 * The engine is pure: it never performs I/O and never throws on stored data.
 */

export const FLAG_TYPES = ['boolean', 'string', 'number', 'object'] as const;
export type FlagType = (typeof FLAG_TYPES)[number];

export interface Condition {
  property: string;
  /** One of OPERATORS; typed as string because stored data may predate or violate validation. */
  operator: string;
  value?: unknown;
}

export interface TargetingRule {
  id: string;
  conditions: Condition[];
  value: unknown;
  /** 0..100 with 0.001 resolution; absent or >= 100 means every matching context. */
  rolloutPercentage?: number;
}

export interface Variant {
  name: string;
  value: unknown;
  weight: number;
}

/**
 * A cohort as the engine reads it (docs/cohorts.md): a context is a member when any rule's
 * conditions all hold. Its conditions use every operator but `in_cohort` (cohorts do not nest).
 */
export interface CohortDefinition {
  id: string;
  rules: { id: string; conditions: Condition[] }[];
}

/** A project's cohorts by id: what a flag's `in_cohort` conditions resolve against when it is compiled. */
export type CohortLookup = ReadonlyMap<string, CohortDefinition>;

/** The evaluable subset of a stored flag. */
export interface FlagDefinition {
  key: string;
  type: FlagType;
  enabled: boolean;
  defaultValue: unknown;
  variants: Variant[];
  targeting: TargetingRule[];
}

export type EvaluationContext = { targetingKey?: string } & Record<string, unknown>;

/**
 * REST reasons. A disabled flag reports DEFAULT here and sets `disabled` on the result,
 * which the OFREP adapter maps to its DISABLED reason.
 */
export type Reason = 'TARGETING_MATCH' | 'DEFAULT' | 'VARIANT' | 'ERROR';

export type ErrorCode =
  | 'FLAG_NOT_FOUND'
  | 'TYPE_MISMATCH'
  | 'PARSE_ERROR'
  | 'TARGETING_KEY_MISSING'
  | 'INVALID_CONTEXT'
  | 'GENERAL';

/** Which side of a rule's partial rollout the targeting key's rollout bucket fell. */
export type RolloutSide = 'in' | 'out';

/** Every field is always present on results from `evaluate`; absent ones hold undefined. */
export interface EvaluationResult {
  flagKey: string;
  value: unknown;
  reason: Reason;
  variant?: string;
  errorCode?: ErrorCode;
  errorMessage?: string;
  disabled?: boolean;
  ruleId?: string;
  /**
   * Set when a partial rollout decided the result: 'in' when the matched rule's rollout held
   * the key, 'out' when the first rule whose conditions held left the key outside its rollout
   * (the value then came from a later rule, the variants or the default). The canary cohorts
   * (docs/evaluation.md#canary-cohorts): treatment and control of that rule.
   */
  rolloutSide?: RolloutSide;
  /** The rule of that rollout (the matched rule when 'in'). */
  rolloutRuleId?: string;
}
