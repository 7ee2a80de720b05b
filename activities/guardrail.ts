import type { GuardrailActivities, GuardrailCheckInput, GuardrailCheckResult } from '../workflows/messages';

export interface GuardrailDeps {
  /**
   * The platform's GuardrailChecker (api/features/guardrails). Optional so a worker started for
   * other workflows alone (tests) still starts; a check reaching such a worker fails and is retried.
   */
  guardrail?: { check(input: GuardrailCheckInput): Promise<GuardrailCheckResult> };
}

export function createGuardrailActivities(deps: GuardrailDeps): GuardrailActivities {
  return {
    async checkGuardrail(input) {
      if (!deps.guardrail) throw new Error('this worker was started without the guardrail checker');
      return deps.guardrail.check(input);
    },
  };
}
