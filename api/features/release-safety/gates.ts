/**
 * Canary gate (CONTRACT 9): compares the treatment side of the canaried rule with its randomized
 * control over the same soak window, with tests that stay valid however often the gate looks.
 * Pure code, no I/O: the pipeline workflow gathers the cohort summaries and calls evaluateGate.
 */

export interface CohortSummary {
  /** Evaluations on this side in the window. */
  exposures: number;
  /** Error signals attributed to this side. */
  errors: number;
  /** Latency samples (ms). */
  latencyCount: number;
  latencyMeanMs: number;
  /** Sample variance (n - 1 denominator). */
  latencyVarianceMs2: number;
  latencyP50Ms: number | null;
  latencyP99Ms: number | null;
}

export interface GateConfig {
  /** Default 0.05. */
  alpha: number;
  /** Default 100. */
  minSamplesPerCohort: number;
  /** Spec 2.9: tolerated increase of the error rate (absolute, e.g. 0.01). */
  errorRateGateDelta: number;
  /** Spec 2.9: tolerated increase of the mean latency. */
  latencyGateDeltaMs: number;
  /** Expected share of exposures in treatment (the rollout fraction among those whose conditions held), for SRM. */
  treatmentShare: number;
}

export interface CohortEvidence {
  exposures: number;
  errors: number;
  errorRate: number;
  latencyP50: number | null;
  latencyP99: number | null;
}

export interface Interval {
  estimate: number;
  lower: number;
  upper: number;
}

/** CONTRACT 9 gate shape. */
export interface GateResult {
  decision: 'pass' | 'fail' | 'wait';
  reason: string;
  /** Names the tests used. */
  test: string;
  alpha: number;
  treatment: CohortEvidence;
  control: CohortEvidence;
  errorRateDelta: Interval;
  latencyDeltaMs: Interval;
  srm: { pValue: number; ok: boolean };
}

/** `final`: the soak has ended (pass possible); during the soak only fail or wait. */
export function evaluateGate(treatment: CohortSummary, control: CohortSummary, config: GateConfig, opts: { final: boolean }): GateResult {
  void treatment;
  void control;
  void config;
  void opts;
  throw new Error('evaluateGate: implementation lands in the next commit (interface committed first for the pipeline workflow)');
}
