import { condition, continueAsNew, proxyActivities, setHandler } from '@temporalio/workflow';
import { banditEndedSignal, BANDIT_ROUNDS_PER_RUN, type BanditActivities, type BanditReallocationInput, type BanditWorkflowResult } from './messages';

const { reallocateBandit } = proxyActivities<BanditActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * One bandit experiment's reallocation schedule (docs/experiments.md "Scheduling"): sleeps the
 * interval, runs a reallocation round, and again, until a round finds the experiment completed,
 * stopped or gone, or the banditEnded signal says so. A sleep loop rather than a Temporal
 * Schedule: the time-skipping test server has no schedule service, and the loop ends with the
 * experiment by itself. After roundsPerRun rounds it continues as new (bounded history).
 */
export async function banditReallocation(input: BanditReallocationInput): Promise<BanditWorkflowResult> {
  let ended: 'completed' | 'stopped' | null = null;
  setHandler(banditEndedSignal, (status) => {
    ended ??= status;
  });
  const intervalMs = input.intervalMinutes * 60_000;
  const rounds = input.roundsPerRun ?? BANDIT_ROUNDS_PER_RUN;
  for (let round = 0; round < rounds; round++) {
    // True when the signal came before the interval passed.
    if (await condition(() => ended !== null, intervalMs)) return ended!;
    const outcome = await reallocateBandit(input.experimentId);
    if (outcome !== 'running') return outcome;
  }
  return continueAsNew<typeof banditReallocation>(input);
}
