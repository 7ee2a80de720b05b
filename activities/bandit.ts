import { HttpError } from '../api/http/errors';
import type { BanditReallocator } from '../api/features/experiments/reallocation';
import type { BanditActivities } from '../workflows/messages';

/** What the bandit activity runs with; optional so a worker started for other workflows alone (tests) still starts. */
export interface BanditDeps {
  bandit?: BanditActivityDeps;
}

export interface BanditActivityDeps {
  /** The same round the reallocate route runs: the flag write path, the warehouse, the guardrail. */
  reallocator: BanditReallocator;
}

/**
 * The bandit workflow's one side effect (workflows/bandit.ts): a scheduled reallocation round.
 * Under retry it is safe: rounds run one at a time under the experiment's round lease, each
 * reads the counts afresh, and a round whose weights are already on the flag writes no version.
 */
export function createBanditActivities({ bandit }: BanditDeps): BanditActivities {
  if (bandit) return banditActivities(bandit);
  return {
    async reallocateBandit() {
      throw new Error('this worker was started without the bandit dependencies');
    },
  };
}

export function banditActivities(deps: BanditActivityDeps): BanditActivities {
  return {
    async reallocateBandit(experimentId) {
      try {
        const experiment = await deps.reallocator.run(experimentId, 'scheduled');
        return experiment ? experiment.status : 'gone';
      } catch (error) {
        // Another round holds the experiment (a manual one, just now), or the flag kept changing
        // under this one: this round is skipped, the next interval runs again.
        if (error instanceof HttpError && error.status === 409) return 'running';
        throw error;
      }
    },
  };
}
