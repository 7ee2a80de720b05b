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
 *
 * Through OTLP (SIM_OTLP_CANARIES, 1,000): the A/A and doubled-error scenarios again, each request a
 * trace head-sampled at 10% and derived into exposures and outcomes by the OTLP ingestion code
 * (docs/opentelemetry.md#what-counts), at 1,000 requests/s (as many sampled traces as the direct
 * scenarios' evaluations) and, for comparison, at 100 requests/s.
 */
import { evaluateGate, SRM_REASON, type CohortSummary, type GateConfig } from '../api/lib/release-safety/gates';
import { logMixtureLikelihoodRatio } from '../api/lib/release-safety/stats/confidence-sequence';
import { normalQuantile } from '../api/lib/release-safety/stats/normal';
import { seededRandom } from '../api/features/experiments/allocation/random';
import { deriveFromTraces, TraceJoin } from '../api/features/analytics/otlp-outcomes';
import { hashTargetingKey } from '../api/features/evaluation/recorder';
import { ExportTraceServiceRequestSchema } from '../api/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import { Span_SpanKind, Status_StatusCode } from '../api/gen/opentelemetry/proto/trace/v1/trace_pb';
import { create } from '@bufbuild/protobuf';

const CANARIES = Number(process.env.SIM_CANARIES ?? 1000);
/** OTLP scenarios build and derive every sampled span: SIM_OTLP_CANARIES=200 is a quicker, noisier pass. */
const OTLP_CANARIES = Number(process.env.SIM_OTLP_CANARIES ?? 1000);
const OTLP_HEAD_SAMPLING = 0.1;
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
  /** Fed through the OTLP path at this many requests/s, head-sampled, instead of counted directly. */
  otlp?: { requestsPerSecond: number };
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
  latencyCount = 0;
  latencySum = 0;
  latencySumOfSquares = 0;

  record(error: boolean, latencyMs: number) {
    this.exposures++;
    this.outcome(error, latencyMs);
  }

  /** An outcome without an exposure: OTLP brings them as separate rows. */
  outcome(error: boolean, latencyMs: number | null) {
    if (error) this.errors++;
    if (latencyMs === null) return;
    this.latencyCount++;
    this.latencySum += latencyMs;
    this.latencySumOfSquares += latencyMs * latencyMs;
  }

  summary(): CohortSummary {
    const n = this.latencyCount;
    const mean = n > 0 ? this.latencySum / n : 0;
    return {
      exposures: this.exposures,
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

/** Feeds one check interval's traffic into the two sides; `endSecond` is the check's time from the stage start. */
type Feed = (endSecond: number, treatment: Side, control: Side) => void;

/** One standard normal (Box-Muller) for a lognormal latency. */
function latencyMs(random: () => number): number {
  const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return LATENCY_MEDIAN_MS * Math.exp(LATENCY_LOG_SD * normal);
}

/** Exposures and outcomes counted directly: one exposure and its outcomes per evaluation. */
function directFeed(scenario: Scenario, random: () => number): Feed {
  return (_endSecond, treatment, control) => {
    for (let i = 0; i < EVALUATIONS_PER_SECOND * CHECK_EVERY_SECONDS; i++) {
      const inTreatment = random() < scenario.actualShare;
      const latency = latencyMs(random);
      if (inTreatment) treatment.record(random() < scenario.treatmentErrorRate, latency + scenario.latencyShiftMs);
      else control.record(random() < scenario.controlErrorRate, latency);
    }
  };
}

const OTLP_TENANT = { projectId: 'prj_sim', serviceId: 'svc_sim', environment: 'production' };
const OTLP_FLAG = 'sim-flag';
/** A fixed clock, so the figures do not depend on when the simulation runs. */
const OTLP_STAGE_START_MS = Date.UTC(2026, 0, 1);
const nanos = (ms: number) => BigInt(Math.round(ms * 1e6));

/**
 * Exposures and outcomes derived from traces (docs/opentelemetry.md#what-counts): every request is
 * a trace whose server span carries one flag evaluation event and ends in error at the side's
 * error rate; head sampling keeps a trace with probability `sampling` (a dropped trace is never
 * exported, so it is never built); each interval's sampled traces go, as one
 * ExportTraceServiceRequest, through deriveFromTraces with the ingestion's TraceJoin. An exposure
 * is on the rule's side its value tells (what ingestion's placement gives for a rule without
 * conditions), and an outcome on the side of its key's latest exposure, as the gate's query does.
 */
function otlpFeed(scenario: Scenario, random: () => number, requestsPerSecond: number, sampling: number): Feed {
  const join = new TraceJoin();
  const sideOfKey = new Map<string, boolean>();
  let traces = 0;
  return (endSecond, treatment, control) => {
    const intervalStartMs = OTLP_STAGE_START_MS + (endSecond - CHECK_EVERY_SECONDS) * 1000;
    const requests = requestsPerSecond * CHECK_EVERY_SECONDS;
    const spans = [];
    for (let i = 0; i < requests; i++) {
      if (random() >= sampling) continue;
      const inTreatment = random() < scenario.actualShare;
      const latency = latencyMs(random) + (inTreatment ? scenario.latencyShiftMs : 0);
      const error = random() < (inTreatment ? scenario.treatmentErrorRate : scenario.controlErrorRate);
      const endMs = intervalStartMs + ((i + 1) * CHECK_EVERY_SECONDS * 1000) / requests;
      const id = ++traces;
      const traceId = Buffer.alloc(16);
      traceId.writeUInt32BE(id, 12);
      const spanId = Buffer.alloc(8);
      spanId.writeUInt32BE(id, 4);
      spans.push({
        traceId,
        spanId,
        name: 'GET /checkout',
        kind: Span_SpanKind.SERVER,
        startTimeUnixNano: nanos(endMs - latency),
        endTimeUnixNano: nanos(endMs),
        status: { code: error ? Status_StatusCode.ERROR : Status_StatusCode.OK },
        events: [
          {
            name: 'feature_flag.evaluation',
            timeUnixNano: nanos(endMs - latency),
            attributes: [
              { key: 'feature_flag.key', value: { value: { case: 'stringValue' as const, value: OTLP_FLAG } } },
              { key: 'feature_flag.context.id', value: { value: { case: 'stringValue' as const, value: `user-${id}` } } },
              { key: 'feature_flag.result.variant', value: { value: { case: 'stringValue' as const, value: inTreatment ? 'on' : 'off' } } },
              { key: 'feature_flag.result.value', value: { value: { case: 'boolValue' as const, value: inTreatment } } },
            ],
          },
        ],
      });
    }
    const request = create(ExportTraceServiceRequestSchema, { resourceSpans: [{ scopeSpans: [{ spans }] }] });
    const derived = deriveFromTraces(request, OTLP_TENANT, join, intervalStartMs + CHECK_EVERY_SECONDS * 1000);
    if (derived.rejected > 0) throw new Error(`simulated OTLP request rejected: ${derived.errorMessage}`);
    for (const exposure of derived.exposures) {
      const inTreatment = exposure.value === true;
      sideOfKey.set(hashTargetingKey(exposure.targetingKey!), inTreatment);
      (inTreatment ? treatment : control).exposures++;
    }
    for (const outcome of derived.outcomes) {
      const inTreatment = sideOfKey.get(outcome.targetingKeyHash);
      if (inTreatment === undefined) throw new Error('simulated OTLP outcome without an exposure of its key');
      const side = inTreatment ? treatment : control;
      if (outcome.event === 'error') side.outcome(true, null);
      else side.outcome(false, outcome.value);
    }
  };
}

function simulateCanary(scenario: Scenario, feed: Feed): CanaryOutcome {
  const treatment = new Side();
  const control = new Side();
  const config: GateConfig = { alpha: ALPHA, minSamplesPerCohort: MIN_SAMPLES, errorRateGateDelta: 0, latencyGateDeltaMs: 0, treatmentShare: scenario.expectedShare };
  const outcome: CanaryOutcome = { gateFail: null, gateSrm: null, gatePassed: false, peekedFixedFail: null, referenceFail: null };
  for (let second = CHECK_EVERY_SECONDS; second <= SOAK_SECONDS; second += CHECK_EVERY_SECONDS) {
    feed(second, treatment, control);
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
  const { otlp } = scenario;
  return Array.from({ length: otlp ? OTLP_CANARIES : CANARIES }, () =>
    simulateCanary(scenario, otlp ? otlpFeed(scenario, random, otlp.requestsPerSecond, OTLP_HEAD_SAMPLING) : directFeed(scenario, random)),
  );
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
  // Through OTLP: 1,000 requests/s sampled at 10% give the gate the direct scenarios' 100 per second.
  const otlpRate = EVALUATIONS_PER_SECOND / OTLP_HEAD_SAMPLING;
  const otlpAa: Scenario = { ...aa, name: `OTLP, ${otlpRate} requests/s sampled ${percent(OTLP_HEAD_SAMPLING)}, A/A`, otlp: { requestsPerSecond: otlpRate } };
  const otlpErrors: Scenario = { ...errors10, name: `OTLP, ${otlpRate} requests/s sampled ${percent(OTLP_HEAD_SAMPLING)}, 2x error rate`, otlp: { requestsPerSecond: otlpRate } };
  const otlpSparse: Scenario = { ...errors10, name: `OTLP, ${EVALUATIONS_PER_SECOND} requests/s sampled ${percent(OTLP_HEAD_SAMPLING)}, 2x error rate`, otlp: { requestsPerSecond: EVALUATIONS_PER_SECOND } };

  const results = new Map<Scenario, CanaryOutcome[]>();
  [aa, aaRare, errors10, errors5, latency, srm, otlpAa, otlpErrors, otlpSparse].forEach((scenario, index) => results.set(scenario, runScenario(scenario, SEED + index)));
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

  const otlpFalse = share(of(otlpAa), gateFail);
  rows.push({ figure: `${otlpAa.name}: false rollbacks`, measured: percent(otlpFalse), bar: `<= ${percent(BARS.falseRollbacks)}`, met: otlpFalse <= BARS.falseRollbacks });
  const otlpDetected = share(of(otlpErrors), gateFail);
  const otlpMedian = median(of(otlpErrors), gateFail);
  rows.push({ figure: `${otlpErrors.name}: detected`, measured: percent(otlpDetected), bar: `>= ${percent(BARS.detected)}`, met: otlpDetected >= BARS.detected });
  rows.push({ figure: `${otlpErrors.name}: median time`, measured: seconds(otlpMedian), bar: `< ${BARS.medianSeconds} s`, met: otlpMedian !== null && otlpMedian < BARS.medianSeconds });
  rows.push({
    figure: `${otlpSparse.name}: detected / median`,
    measured: `${percent(share(of(otlpSparse), gateFail))} / ${seconds(median(of(otlpSparse), gateFail))}`,
    bar: 'for comparison',
    met: null,
  });

  const width = Math.max(...rows.map((r) => r.figure.length));
  console.log(`\n${CANARIES} canaries per scenario, seed ${SEED}: ${EVALUATIONS_PER_SECOND} evaluations/s, gate every ${CHECK_EVERY_SECONDS} s, ${SOAK_SECONDS / 60}-minute soak, alpha ${ALPHA}, base error rate ${percent(BASE_ERROR_RATE)}\n`);
  console.log(`| ${'figure'.padEnd(width)} | measured      | bar            | met |`);
  console.log(`|${'-'.repeat(width + 2)}|---------------|----------------|-----|`);
  for (const r of rows) {
    console.log(`| ${r.figure.padEnd(width)} | ${r.measured.padEnd(13)} | ${r.bar.padEnd(14)} | ${r.met === null ? '-  ' : r.met ? 'yes' : 'NO '} |`);
  }
  console.log(`\n(OTLP scenarios: ${OTLP_CANARIES} canaries each, 10% stage, traces derived by the OTLP ingestion code; median over the canaries that detected; reference mSPRT: one-sided normal mixture, sd 1 point, Wald variance; total ${Math.round((Date.now() - started) / 1000)} s)`);
}

main();
