/**
 * The one health vocabulary of the canary pages: a pipeline's state from its record and its
 * latest gate check (docs/canary.md: `health` is derived from the latest gate), each with a label
 * and an explanation, and the check whose numbers the page shows.
 */
import { percent } from './format';
import type { CanaryConfig, CanaryGate, CanaryRecord } from './types';

export type HealthState = 'not_checked' | 'passing' | 'waiting' | 'failing' | 'completed' | 'rolled_back' | 'aborted';

export const HEALTH_LABEL: Record<HealthState, string> = {
  not_checked: 'Not checked yet',
  passing: 'Passing',
  waiting: 'Waiting for data',
  failing: 'Failing',
  completed: 'Completed',
  rolled_back: 'Rolled back',
  aborted: 'Aborted',
};

/** The stylesheet's badge for each state: waiting is not coloured as a failure. */
export const HEALTH_BADGE: Record<HealthState, string> = {
  not_checked: 'rs-badge-planned',
  passing: 'rs-decision-pass',
  waiting: 'rs-decision-wait',
  failing: 'rs-decision-fail',
  completed: 'rs-status-completed',
  rolled_back: 'rs-status-rolled_back',
  aborted: 'rs-status-aborted',
};

/** A gate's decision in the page's words: `wait` is waiting for data unless the data sufficed and only the soak is left. */
export function gateState(gate: CanaryGate, config: CanaryConfig): 'passing' | 'waiting' | 'failing' {
  if (gate.decision === 'fail') return 'failing';
  if (gate.decision === 'pass') return 'passing';
  return missingEvidence(gate, config) ? 'waiting' : 'passing';
}

/**
 * What a gate lacks to decide, in docs/canary.md's words (exposures per side, a sound split,
 * every guard judged), or undefined when it has it all and only the soak is left.
 */
function missingEvidence(gate: CanaryGate, config: CanaryConfig): string | undefined {
  if (gate.treatment.exposures < config.minSamplesPerCohort || gate.control.exposures < config.minSamplesPerCohort) return `Fewer than ${config.minSamplesPerCohort.toLocaleString()} exposures in a cohort`;
  if (!gate.srm.ok) return 'The split between the cohorts is off (sample ratio mismatch)';
  if ((gate.guards ?? []).some((g) => g.decision === 'wait')) return 'A guard could not be judged';
  return undefined;
}

export interface CanaryHealthView {
  state: HealthState;
  label: string;
  explanation: string;
  /** The gate check every number of the page comes from, and when it was taken. */
  evidence?: { gate: CanaryGate; checkedAt: string };
}

export function canaryHealth(record: CanaryRecord): CanaryHealthView {
  const { config, currentStage, health } = record;
  // An active pipeline's latest check counts only for the stage it was made in.
  const checkedThisStage = !!health.gate && !!health.checkedAt && (!currentStage || health.checkedAt >= currentStage.startedAt);
  const evidence = checkedThisStage ? { gate: health.gate!, checkedAt: health.checkedAt! } : undefined;
  const view = (state: HealthState, explanation: string): CanaryHealthView => ({ state, label: HEALTH_LABEL[state], explanation, evidence });

  if (record.status === 'completed') return view('completed', `Every stage passed: the rule serves ${percent(config.targetRolloutPercent)} of its users.`);
  if (record.status === 'rolled_back') return view('rolled_back', 'A gate found harm, so the flag was restored to its content from before the canary.');
  if (record.status === 'aborted') return view('aborted', 'Stopped by a person: the flag was restored to its content from before the canary.');
  if (!evidence) return view('not_checked', 'The first gate check of this stage comes a tenth of the soak after it started.');

  const paused = record.status === 'paused';
  const state = gateState(evidence.gate, config);
  if (state === 'failing') {
    return view('failing', `The gate found harm beyond its limits${paused ? ': paused until someone advances or aborts.' : '.'}`);
  }
  if (state === 'waiting') {
    const missing = missingEvidence(evidence.gate, config) ?? 'Too little data';
    return view('waiting', paused ? `${missing}: past the wait limit, paused until someone advances or aborts.` : `${missing}: the gate cannot decide yet, so the stage keeps soaking.`);
  }
  return view('passing', evidence.gate.decision === 'pass' ? 'The gate passed.' : 'Enough data and no harm so far: the stage passes if the check at the end of its soak agrees.');
}
