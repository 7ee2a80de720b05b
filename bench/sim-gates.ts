/**
 * `npm run sim:gates` (docs/quality-bars.md#release-safety): SIM_CANARIES (1,000) simulated canary
 * stages per scenario through the real gate code (api/lib/release-safety/gates.ts), with
 * synthetic exposures and outcomes from a seeded PRNG, so every run prints the same figures.
 *
 * A stage: 100 evaluations/s whose rule conditions held, each in treatment with the stage's
 * share (10%), one latency sample per evaluation (lognormal, median 100 ms, log-sd 1: mean
 * 165 ms, sd 216 ms, p99 about 1 s), errors at a 1% base rate; the gate is checked every 10 s
 * over the cumulative window from the stage start, the 5-minute soak's last check being `final`.
 * Gate config: alpha 0.05, 100 exposures per side, tolerated error-rate and latency increases 0
 * (any harm counts), so an A/A fail is exactly a false rollback.
 *
 * Scenarios: A/A (at the 1% base rate, and at 0.1% where error counts are small and skewed); treatment error rate doubled (1% -> 2%) at a 10% and a 5% first stage;
 * treatment latency +50 ms; a 45/55 split where 50/50 was expected (sample-ratio mismatch).
 * For comparison on the same simulated data: a fixed-horizon one-sided z-test (pooled two
 * proportions; Welch z for latency) peeked at every check, and a reference for comparison, a plain
 * one-sided normal-mixture mSPRT with a mixture sd of one percentage point and Wald variance.
 */
import { evaluateGate, SRM_REASON, type CohortSummary, type GateConfig } from '../api/lib/release-safety/gates';
import { logMixtureLikelihoodRatio } from '../api/lib/release-safety/stats/confidence-sequence';
import { normalQuantile } from '../api/lib/release-safety/stats/normal';
import { seededRandom } from '../api/features/experiments/allocation/random';

const CANARIES = Number(process.env.SIM_CANARIES ?? 1000);
const SEED = Number(process.env.SIM_SEED ?? 13);
const EVALUATIONS_PER_SECOND = 100;
const CHECK_EVERY_SECONDS = 10;
const SOAK_SECONDS = 300;
const BASE_ERROR_RATE = 0.01;
const LATENCY_MEDIAN_MS = 100;
const LATENCY_LOG_SD = 1;
const ALPHA = 0.05;
const MIN_SAMPLES = 100;
/** The reference test: mixture sd of one percentage point on the error-rate difference. */
const REFERENCE_MIXTURE_SD = 0.01;
const BARS = { falseRollbacks: ALPHA, detected: 0.95, medianSeconds: 100, srmFalseAlarms: 0.01 };

interface Scenario {
  name: string;
  /** Share of exposures the gate expects in treatment. */
  expectedShare: number;
  /** Share the simulated traffic really sends to treatment. */
  actualShare: number;
  controlErrorRate: number;
  treatmentErrorRate: number;
  latencyShiftMs: number;
}

/** What happened to one simulated canary: seconds from the stage start to each event, null when it never happened. */
interface CanaryOutcome {
  gateFail: number | null;
  gateSrm: number | null;
  gatePassed: boolean;
  peekedFixedFail: number | null;
  referenceFail: number | null;
}


/** Running sums of one side since the stage start. */
class Side {
  exposures = 0;
  errors = 0;
  latencySum = 0;
  latencySumOfSquares = 0;

  record(error: boolean, latencyMs: number) {
    this.exposures++;
    if (error) this.errors++;
    this.latencySum += latencyMs;
    this.latencySumOfSquares += latencyMs * latencyMs;
  }

  summary(): CohortSummary {
    const n = this.exposures;
    const mean = n > 0 ? this.latencySum / n : 0;
    return {
      exposures: n,
      errors: this.errors,
      latencyCount: n,
      latencyMeanMs: mean,
      latencyVarianceMs2: n > 1 ? (this.latencySumOfSquares - n * mean * mean) / (n - 1) : 0,
      // Percentiles are evidence only; the tests use means and variances.
      latencyP50Ms: null,
      latencyP99Ms: null,
    };
  }
}

const Z_FIXED = normalQuantile(1 - ALPHA);

/** Fixed-horizon one-sided tests (pooled two-proportion z, Welch z on latency), as if run at every check. */
function fixedHorizonRejects(t: CohortSummary, c: CohortSummary): boolean {
  const pooled = (t.errors + c.errors) / (t.exposures + c.exposures);
  const rateSe = Math.sqrt(pooled * (1 - pooled) * (1 / t.exposures + 1 / c.exposures));
  const rateZ = rateSe > 0 ? (t.errors / t.exposures - c.errors / c.exposures) / rateSe : 0;
  const latencyZ = (t.latencyMeanMs - c.latencyMeanMs) / Math.sqrt(t.latencyVarianceMs2 / t.latencyCount + c.latencyVarianceMs2 / c.latencyCount);
  return rateZ > Z_FIXED || latencyZ > Z_FIXED;
}

/**
 * The reference test: one-sided half-normal mixture (sd 1 point) on the error-rate difference, Wald
 * variance.
 */
function referenceRejects(t: CohortSummary, c: CohortSummary): boolean {
  const p1 = t.errors / t.exposures;
  const p2 = c.errors / c.exposures;
  const variance = (p1 * (1 - p1)) / t.exposures + (p2 * (1 - p2)) / c.exposures;
  if (!(variance > 0)) return false;
  const z = (p1 - p2) / Math.sqrt(variance);
  return logMixtureLikelihoodRatio(z, REFERENCE_MIXTURE_SD ** 2 / variance) >= -Math.log(ALPHA);
}

function simulateCanary(scenario: Scenario, random: () => number): CanaryOutcome {
  const treatment = new Side();
  const control = new Side();
  const config: GateConfig = { alpha: ALPHA, minSamplesPerCohort: MIN_SAMPLES, errorRateGateDelta: 0, latencyGateDeltaMs: 0, treatmentShare: scenario.expectedShare };
  const outcome: CanaryOutcome = { gateFail: null, gateSrm: null, gatePassed: false, peekedFixedFail: null, referenceFail: null };
  for (let second = CHECK_EVERY_SECONDS; second <= SOAK_SECONDS; second += CHECK_EVERY_SECONDS) {
    for (let i = 0; i < EVALUATIONS_PER_SECOND * CHECK_EVERY_SECONDS; i++) {
      const inTreatment = random() < scenario.actualShare;
      // Box-Muller: one standard normal per evaluation for its lognormal latency.
      const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
      const latency = LATENCY_MEDIAN_MS * Math.exp(LATENCY_LOG_SD * normal);
      if (inTreatment) treatment.record(random() < scenario.treatmentErrorRate, latency + scenario.latencyShiftMs);
      else control.record(random() < scenario.controlErrorRate, latency);
    }
    const t = treatment.summary();
    const c = control.summary();
    if (outcome.gateFail === null && !outcome.gatePassed) {
      const gate = evaluateGate(t, c, config, { final: second === SOAK_SECONDS });
      if (gate.decision === 'fail') outcome.gateFail = second;
      if (gate.decision === 'pass') outcome.gatePassed = true;
      if (gate.reason === SRM_REASON && outcome.gateSrm === null) outcome.gateSrm = second;
    }
    if (t.exposures >= MIN_SAMPLES && c.exposures >= MIN_SAMPLES) {
      if (outcome.peekedFixedFail === null && fixedHorizonRejects(t, c)) outcome.peekedFixedFail = second;
      if (outcome.referenceFail === null && referenceRejects(t, c)) outcome.referenceFail = second;
    }
  }
  return outcome;
}

function runScenario(scenario: Scenario, seed: number): CanaryOutcome[] {
  const random = seededRandom(seed);
  return Array.from({ length: CANARIES }, () => simulateCanary(scenario, random));
}

const share = (outcomes: CanaryOutcome[], pick: (o: CanaryOutcome) => number | null) => outcomes.filter((o) => pick(o) !== null).length / outcomes.length;

function median(outcomes: CanaryOutcome[], pick: (o: CanaryOutcome) => number | null): number | null {
  const times = outcomes.map(pick).filter((t): t is number => t !== null).sort((a, b) => a - b);
  if (times.length === 0) return null;
  const middle = Math.floor(times.length / 2);
  return times.length % 2 ? times[middle] : (times[middle - 1] + times[middle]) / 2;
}

interface Row {
  figure: string;
  measured: string;
  bar: string;
  met: boolean | null;
}

const percent = (x: number) => `${(100 * x).toFixed(1)}%`;
const seconds = (x: number | null) => (x === null ? '-' : `${x} s`);

function main() {
  const started = Date.now();
  const aa: Scenario = { name: 'A/A', expectedShare: 0.1, actualShare: 0.1, controlErrorRate: BASE_ERROR_RATE, treatmentErrorRate: BASE_ERROR_RATE, latencyShiftMs: 0 };
  const aaRare: Scenario = { ...aa, name: 'A/A at a 0.1% error rate', controlErrorRate: BASE_ERROR_RATE / 10, treatmentErrorRate: BASE_ERROR_RATE / 10 };
  const errors10: Scenario = { ...aa, name: '2x error rate, 10% stage', treatmentErrorRate: 2 * BASE_ERROR_RATE };
  const errors5: Scenario = { ...errors10, name: '2x error rate, 5% stage', expectedShare: 0.05, actualShare: 0.05 };
  const latency: Scenario = { ...aa, name: '+50 ms latency, 10% stage', latencyShiftMs: 50 };
  const srm: Scenario = { ...aa, name: '45/55 split, 50/50 expected', expectedShare: 0.5, actualShare: 0.45 };

  const results = new Map<Scenario, CanaryOutcome[]>();
  [aa, aaRare, errors10, errors5, latency, srm].forEach((scenario, index) => results.set(scenario, runScenario(scenario, SEED + index)));
  const of = (s: Scenario) => results.get(s)!;

  const gateFail = (o: CanaryOutcome) => o.gateFail;
  const rows: Row[] = [];
  const aaFalse = share(of(aa), gateFail);
  rows.push({ figure: 'A/A: false rollbacks (gate fails within the soak)', measured: percent(aaFalse), bar: `<= ${percent(BARS.falseRollbacks)}`, met: aaFalse <= BARS.falseRollbacks });
  const aaRareFalse = share(of(aaRare), gateFail);
  rows.push({ figure: 'A/A at a 0.1% error rate: false rollbacks', measured: percent(aaRareFalse), bar: `<= ${percent(BARS.falseRollbacks)}`, met: aaRareFalse <= BARS.falseRollbacks });
  const aaSrm = share(of(aa), (o) => o.gateSrm);
  rows.push({ figure: 'A/A: SRM false alarms (any check blocked)', measured: percent(aaSrm), bar: `<= ${percent(BARS.srmFalseAlarms)}`, met: aaSrm <= BARS.srmFalseAlarms });
  const aaPassed = of(aa).filter((o) => o.gatePassed).length / CANARIES;
  rows.push({ figure: 'A/A: stages passed at the end of the soak', measured: percent(aaPassed), bar: `>= ${percent(1 - BARS.falseRollbacks - BARS.srmFalseAlarms)}`, met: aaPassed >= 1 - BARS.falseRollbacks - BARS.srmFalseAlarms });
  const aaFixed = share(of(aa), (o) => o.peekedFixedFail);
  rows.push({ figure: 'A/A: fixed-horizon z-tests peeked at every check', measured: percent(aaFixed), bar: `<= ${percent(BARS.falseRollbacks)}`, met: aaFixed <= BARS.falseRollbacks });
  const aaReference = share(of(aa), (o) => o.referenceFail);
  rows.push({ figure: 'A/A: reference mSPRT (error rate only)', measured: percent(aaReference), bar: 'for comparison', met: null });

  for (const scenario of [errors10, errors5]) {
    const detected = share(of(scenario), gateFail);
    const medianSeconds = median(of(scenario), gateFail);
    const bindingBars = scenario === errors10;
    rows.push({ figure: `${scenario.name}: detected within the soak`, measured: percent(detected), bar: bindingBars ? `>= ${percent(BARS.detected)}` : 'for comparison', met: bindingBars ? detected >= BARS.detected : null });
    rows.push({
      figure: `${scenario.name}: median time to detect`,
      measured: seconds(medianSeconds),
      bar: bindingBars ? `< ${BARS.medianSeconds} s` : 'for comparison',
      met: bindingBars ? medianSeconds !== null && medianSeconds < BARS.medianSeconds : null,
    });
    const referenceDetected = share(of(scenario), (o) => o.referenceFail);
    rows.push({ figure: `${scenario.name}: reference mSPRT detected / median`, measured: `${percent(referenceDetected)} / ${seconds(median(of(scenario), (o) => o.referenceFail))}`, bar: 'for comparison', met: null });
  }

  const latencyDetected = share(of(latency), gateFail);
  const latencyMedian = median(of(latency), gateFail);
  rows.push({ figure: `${latency.name}: detected within the soak`, measured: percent(latencyDetected), bar: `>= ${percent(BARS.detected)}`, met: latencyDetected >= BARS.detected });
  rows.push({ figure: `${latency.name}: median time to detect`, measured: seconds(latencyMedian), bar: `< ${BARS.medianSeconds} s`, met: latencyMedian !== null && latencyMedian < BARS.medianSeconds });

  const srmDetected = share(of(srm), (o) => o.gateSrm);
  const srmMedian = median(of(srm), (o) => o.gateSrm);
  const srmDecided = share(of(srm), (o) => (o.gateFail !== null || o.gatePassed ? 1 : null));
  rows.push({ figure: `${srm.name}: SRM blocks the gate within the soak`, measured: percent(srmDetected), bar: `>= ${percent(BARS.detected)}`, met: srmDetected >= BARS.detected });
  rows.push({ figure: `${srm.name}: median time to SRM`, measured: seconds(srmMedian), bar: `< ${BARS.medianSeconds} s`, met: srmMedian !== null && srmMedian < BARS.medianSeconds });
  rows.push({ figure: `${srm.name}: stages decided (pass or fail) anyway`, measured: percent(srmDecided), bar: `<= ${percent(1 - BARS.detected)}`, met: srmDecided <= 1 - BARS.detected });

  const width = Math.max(...rows.map((r) => r.figure.length));
  console.log(`\n${CANARIES} canaries per scenario, seed ${SEED}: ${EVALUATIONS_PER_SECOND} evaluations/s, gate every ${CHECK_EVERY_SECONDS} s, ${SOAK_SECONDS / 60}-minute soak, alpha ${ALPHA}, base error rate ${percent(BASE_ERROR_RATE)}\n`);
  console.log(`| ${'figure'.padEnd(width)} | measured      | bar            | met |`);
  console.log(`|${'-'.repeat(width + 2)}|---------------|----------------|-----|`);
  for (const r of rows) {
    console.log(`| ${r.figure.padEnd(width)} | ${r.measured.padEnd(13)} | ${r.bar.padEnd(14)} | ${r.met === null ? '-  ' : r.met ? 'yes' : 'NO '} |`);
  }
  console.log(`\n(median over the canaries that detected; reference mSPRT: one-sided normal mixture, sd 1 point, Wald variance; total ${Math.round((Date.now() - started) / 1000)} s)`);
}

main();
