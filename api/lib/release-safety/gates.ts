import { effectiveSampleSize, mixingRate, mixtureBoundary } from './stats/confidence-sequence';
import { meanDifferenceBounds } from './stats/means';
import { rateDifferenceBounds } from './stats/proportions';
import { sampleRatioTest } from './stats/srm';
import type { CanaryGate } from '../../domain/canary';
import type { OutcomeSummary } from './outcomes';

/**
 * Canary gate (docs/canary.md): compares the treatment side of the canaried rule with its
 * randomized control over the same soak window, with tests that stay valid however often the gate
 * looks (docs/release-safety-statistics.md). Pure code, no I/O: the pipeline workflow gathers the
 * cohort summaries and calls evaluateGate at every check.
 *
 * - Error rate: one-sided normal-mixture confidence sequence on treatment - control with
 *   score (restricted maximum likelihood) variance; fails when its lower bound exceeds
 *   errorRateGateDelta.
 * - Latency: the same confidence sequence on the difference of mean latencies (Welch variance);
 *   fails when its lower bound exceeds latencyGateDeltaMs.
 * - Sample-ratio mismatch: chi-square goodness of fit of the exposures against treatmentShare;
 *   p < SRM_P_VALUE blocks every decision.
 */

/** One side's exposures and the application outcomes attributed to it (api/lib/release-safety/outcomes.ts). */
export interface CohortSummary extends OutcomeSummary {
  /** Evaluations on this side in the window. */
  exposures: number;
}

export interface GateConfig {
  /** Default 0.05. */
  alpha: number;
  /** Default 100. */
  minSamplesPerCohort: number;
  /** Tolerated increase of the error rate, absolute, e.g. 0.01 (docs/canary.md). */
  errorRateGateDelta: number;
  /** Tolerated increase of the mean latency (docs/canary.md). */
  latencyGateDeltaMs: number;
  /** Expected share of exposures in treatment (the rollout fraction among those whose conditions held), for SRM. */
  treatmentShare: number;
}

/** The gate's shape is the canary record's (api/domain/canary.ts, docs/canary.md). */
export type GateResult = CanaryGate;
type CohortEvidence = CanaryGate['treatment'];

/** A chi-square p-value below this is a broken split. Strict because the test is repeated at every check. */
export const SRM_P_VALUE = 0.001;

/** The reason of a gate that a broken split blocked; the pipeline pauses on it. */
export const SRM_REASON = 'sample ratio mismatch';

/**
 * Effective samples per side, n1 n2 / (n1 + n2), at which the confidence sequences are tightest
 * (the mixing variance is tuned there): about 550 treatment exposures at a 10% stage, where a
 * doubling of a 1% error rate starts to show. The boundary is flat around its optimum (bench
 * figures for 300 to 1,000 differ by one check), so other volumes lose little.
 */
export const DESIGN_EFFECTIVE_SAMPLES = 500;

export const GATE_TEST_NAME =
  'error rate: one-sided anytime-valid normal-mixture confidence sequence on treatment - control (score variance, Farrington-Manning, continuity-corrected); ' +
  'latency: the same on the difference of mean latencies (Welch variance); ' +
  `sample ratio: chi-square goodness of fit of exposures, blocks below p ${SRM_P_VALUE}`;

/** `final`: the soak has ended (pass possible); during the soak only fail or wait. */
export function evaluateGate(treatment: CohortSummary, control: CohortSummary, config: GateConfig, opts: { final: boolean }): GateResult {
  const { alpha, minSamplesPerCohort } = config;
  // An error signal is judged per exposure: more errors than exposures is capped at a rate of 1.
  const treatmentErrors = Math.min(treatment.errors, treatment.exposures);
  const controlErrors = Math.min(control.errors, control.exposures);
  const rho2 = mixingRate(alpha, DESIGN_EFFECTIVE_SAMPLES);

  const exposureBoundary = mixtureBoundary(rho2 * effectiveSampleSize(treatment.exposures, control.exposures), alpha);
  const errorRateDelta = rateDifferenceBounds(treatmentErrors, treatment.exposures, controlErrors, control.exposures, exposureBoundary);

  const latencyMeasured = treatment.latencyCount >= 2 && control.latencyCount >= 2;
  const latencyBoundary = mixtureBoundary(rho2 * effectiveSampleSize(treatment.latencyCount, control.latencyCount), alpha);
  const latency = latencyMeasured
    ? meanDifferenceBounds(
        { count: treatment.latencyCount, mean: treatment.latencyMeanMs, variance: treatment.latencyVarianceMs2 },
        { count: control.latencyCount, mean: control.latencyMeanMs, variance: control.latencyVarianceMs2 },
        latencyBoundary,
      )
    : null;

  const srmTest = sampleRatioTest(treatment.exposures, control.exposures, config.treatmentShare);
  const srm = { pValue: srmTest.pValue, ok: srmTest.pValue >= SRM_P_VALUE };

  const result = (decision: GateResult['decision'], reason: string): GateResult => ({
    decision,
    reason,
    test: GATE_TEST_NAME,
    alpha,
    treatment: evidence(treatment, treatmentErrors),
    control: evidence(control, controlErrors),
    errorRateDelta,
    latencyDeltaMs: latency ?? { estimate: null, lower: null, upper: null },
    srm,
  });

  if (!srm.ok) return result('wait', SRM_REASON);
  if (treatment.exposures < minSamplesPerCohort || control.exposures < minSamplesPerCohort) {
    return result('wait', `too little data: ${treatment.exposures} treatment and ${control.exposures} control exposures, ${minSamplesPerCohort} per side needed`);
  }
  if (errorRateDelta.lower > config.errorRateGateDelta) {
    return result('fail', `error rate: treatment - control is at least ${formatNumber(errorRateDelta.lower)}, above the tolerated ${formatNumber(config.errorRateGateDelta)}`);
  }
  const latencyJudged = treatment.latencyCount >= minSamplesPerCohort && control.latencyCount >= minSamplesPerCohort;
  if (latency && latencyJudged && latency.lower > config.latencyGateDeltaMs) {
    return result('fail', `latency: treatment - control is at least ${formatNumber(latency.lower)} ms, above the tolerated ${formatNumber(config.latencyGateDeltaMs)} ms`);
  }
  if (!opts.final) return result('wait', 'soaking: no harm shown yet');
  // A service that reports no latency at all is gated on errors alone; one that reports some must report enough.
  const latencyReported = treatment.latencyCount > 0 || control.latencyCount > 0;
  if (latencyReported && !latencyJudged) {
    return result('wait', `too little latency data: ${treatment.latencyCount} treatment and ${control.latencyCount} control samples, ${minSamplesPerCohort} per side needed`);
  }
  return result('pass', latencyReported ? 'no harm shown in error rate or latency' : 'no harm shown in error rate (no latency reported)');
}

function evidence(cohort: CohortSummary, errors: number): CohortEvidence {
  return {
    exposures: cohort.exposures,
    errors,
    errorRate: cohort.exposures > 0 ? errors / cohort.exposures : 0,
    latencyP50: cohort.latencyP50Ms,
    latencyP99: cohort.latencyP99Ms,
  };
}

const formatNumber = (n: number) => Number(n.toPrecision(4)).toString();
