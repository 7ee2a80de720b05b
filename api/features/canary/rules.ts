import type { FlagTargetingRule } from '../flags/types';

/** The id of the rule a pipeline inserts when it is not given one (docs/canary.md). */
export const INSERTED_RULE_ID = 'canary';

/** The targeting with the rule's rollout set (the inserted rule first when it is missing). */
export function withRollout(targeting: FlagTargetingRule[], ruleId: string, rolloutPercent: number, insertRuleValue: string | undefined): FlagTargetingRule[] {
  const present = targeting.some((r) => r.id === ruleId);
  if (!present) {
    if (insertRuleValue === undefined) throw new Error(`rule ${ruleId} is no longer in the flag's targeting`);
    return [{ id: ruleId, conditions: [], value: JSON.parse(insertRuleValue) as FlagTargetingRule['value'], rolloutPercentage: rolloutPercent }, ...targeting];
  }
  return targeting.map((r) => (r.id === ruleId ? { ...r, rolloutPercentage: rolloutPercent } : r));
}
