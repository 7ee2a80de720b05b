/**
 * A canary's stages as a timeline: every planned stage (from the configuration) with its state,
 * and for each checked stage the gate's evidence (docs/canary.md): decision and reason, both
 * cohorts, the error-rate and latency deltas with their intervals against the thresholds, the split
 * check. Every stage keeps the same box from the start (planned ones included), so live updates
 * change text, never the layout.
 */
import { duration, interval, ms, msDelta, percent, rate, ratePoints, time } from './format';
import { canaryHealth, gateState, HEALTH_BADGE, HEALTH_LABEL } from './health';
import { plannedStages, type CanaryConfig, type CanaryGate, type CanaryRecord, type CanaryStage } from './types';

type StageState = 'passed' | 'forced' | 'failed' | 'running' | 'paused' | 'ended' | 'planned' | 'skipped';

const STATE_LABEL: Record<StageState, string> = {
  passed: 'Passed',
  forced: 'Forced',
  failed: 'Failed',
  running: 'Running',
  paused: 'Paused',
  ended: 'Stopped here',
  planned: 'Planned',
  skipped: 'Not reached',
};

interface TimelineStage {
  index: number;
  rolloutPercent: number;
  state: StageState;
  stage?: CanaryStage;
  gate?: CanaryGate;
  /** The current stage's: when the gate shown was checked (a finished stage's gate is of its end). */
  checkedAt?: string;
}

function timelineOf(record: CanaryRecord): TimelineStage[] {
  const ended = record.status !== 'running' && record.status !== 'paused';
  const byIndex = new Map(record.completedStages.map((s) => [s.index, s]));
  const current = record.currentStage;
  return plannedStages(record.config).map((rolloutPercent, index) => {
    const done = byIndex.get(index);
    if (done) {
      const state: StageState = done.forcedBy ? 'forced' : done.gate?.decision === 'fail' ? 'failed' : done.gate?.decision === 'pass' || !done.gate ? 'passed' : 'ended';
      return { index, rolloutPercent: done.rolloutPercent, state, stage: done, gate: done.gate };
    }
    if (current?.index === index) {
      // The same check as the page's summary, so both show the same numbers.
      const evidence = canaryHealth(record).evidence;
      const gate = evidence?.gate ?? current.gate;
      const state: StageState = ended ? (gate?.decision === 'fail' ? 'failed' : 'ended') : record.status === 'paused' ? 'paused' : 'running';
      return { index, rolloutPercent: current.rolloutPercent, state, stage: current, gate, checkedAt: evidence?.checkedAt };
    }
    return { index, rolloutPercent, state: ended ? 'skipped' : 'planned' };
  });
}

export function StageTimeline({ record }: { record: CanaryRecord }) {
  const config = record.config;
  const stages = timelineOf(record);
  return (
    <ol className="rs-timeline" aria-label="Canary stages">
      {stages.map((s) => (
        <li key={s.index} className={`rs-stage rs-stage-${s.state}`} aria-current={s.state === 'running' || s.state === 'paused' ? 'step' : undefined}>
          <div className="rs-stage-head">
            <h3>
              Stage {s.index + 1}: {percent(s.rolloutPercent)}
            </h3>
            <span className={`rs-badge rs-badge-${s.state}`}>{STATE_LABEL[s.state]}</span>
            <span className="rs-stage-times muted">
              {s.stage ? `${time(s.stage.startedAt)} – ${s.stage.endedAt ? time(s.stage.endedAt) : s.state === 'running' ? `soak ${duration(record.remainingSoakSeconds)} left` : 'now'}` : ' '}
              {/* The numbers below are of this check (the page's summary names the same one). */}
              {s.checkedAt && !s.stage?.endedAt ? `, numbers of the check at ${time(s.checkedAt)}` : ''}
            </span>
          </div>
          {s.stage?.forcedBy && <p className="rs-note">Forced by {s.stage.forcedBy}: soak and gate skipped.</p>}
          <GateEvidence gate={s.gate} state={s.state} config={config} />
        </li>
      ))}
    </ol>
  );
}

/** What a live stage shows before its first check: the same boxes as a check, without numbers. */
const UNCHECKED_COHORT = { exposures: null, errors: null, errorRate: null, latencyP50: null, latencyP99: null };

/**
 * One gate's evidence in a fixed grid. A live stage renders the same grid before its first check
 * (dashes), so the first numbers replace text instead of growing the box.
 */
function GateEvidence({ gate, state, config }: { gate?: CanaryGate; state: StageState; config: CanaryConfig }) {
  const live = state === 'running' || state === 'paused';
  if (!gate && !live) {
    const why: Record<StageState, string> = {
      planned: 'Not started.',
      skipped: 'The pipeline ended before this stage.',
      forced: 'No gate was run.',
      passed: 'No gate was run.',
      ended: 'The pipeline ended before the first check.',
      failed: 'No gate evidence recorded.',
      running: '',
      paused: '',
    };
    return (
      <div className="rs-gate rs-gate-empty">
        <p className="muted">{why[state]}</p>
      </div>
    );
  }
  const decision = gate ? gateState(gate, config) : 'not_checked';
  const cohorts = { treatment: gate?.treatment ?? UNCHECKED_COHORT, control: gate?.control ?? UNCHECKED_COHORT };
  const count = (n: number | null) => (n === null ? '—' : n.toLocaleString());
  return (
    <div className="rs-gate">
      <p className="rs-decision">
        <span className={`rs-badge ${HEALTH_BADGE[decision]}`}>Gate: {HEALTH_LABEL[decision]}</span>{' '}
        <span className="rs-reason">{gate ? gate.reason : 'the first check comes a tenth of the soak after the stage started'}</span>
      </p>
      <table className="rs-cohorts">
        <caption className="visually-hidden">Cohorts of this stage</caption>
        <thead>
          <tr>
            <th scope="col">Cohort</th>
            <th scope="col">Exposures</th>
            <th scope="col">Errors</th>
            <th scope="col">Error rate</th>
            <th scope="col">Latency p50</th>
            <th scope="col">Latency p99</th>
          </tr>
        </thead>
        <tbody>
          {(['treatment', 'control'] as const).map((side) => (
            <tr key={side}>
              <th scope="row">{side === 'treatment' ? 'Treatment (in rollout)' : 'Control (outside)'}</th>
              <td>{count(cohorts[side].exposures)}</td>
              <td>{count(cohorts[side].errors)}</td>
              <td>{rate(cohorts[side].errorRate)}</td>
              <td>{ms(cohorts[side].latencyP50)}</td>
              <td>{ms(cohorts[side].latencyP99)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <dl className="rs-stats">
        <div>
          <dt>Error-rate delta</dt>
          <dd>
            {gate ? interval(gate.errorRateDelta, ratePoints) : '—'} <span className="rs-limit muted">limit {ratePoints(config.errorRateGateDelta)}</span>
          </dd>
        </div>
        <div>
          <dt>Latency delta</dt>
          <dd>
            {gate ? interval(gate.latencyDeltaMs, msDelta) : '—'} <span className="rs-limit muted">limit {msDelta(config.latencyGateDeltaMs)}</span>
          </dd>
        </div>
        <div>
          <dt>Split (SRM)</dt>
          <dd>
            {gate ? `${gate.srm.ok ? 'sound' : 'mismatch'}, p = ${gate.srm.pValue.toPrecision(3)}` : '—'}
          </dd>
        </div>
      </dl>
      {/* Long and the same for every check: folded, so it never changes the box's height. */}
      {gate ? (
        <details className="rs-test">
          <summary>Statistical test (α = {gate.alpha})</summary>
          <p>{gate.test}</p>
        </details>
      ) : (
        <p className="rs-test">Statistical test: after the first check</p>
      )}
    </div>
  );
}
