/**
 * One flag's release safety in one environment: its canary (the active one, else the latest) as a
 * live stage timeline with advance / force / abort, the production guardrail's state and the
 * flag's rollback history. The canary record is polled every 2 s while the pipeline is active
 * (GET answers the workflow's live state: stage, remaining soak, latest gate).
 */
import { Link, useParams, useSearch } from 'wouter';
import { useCanary, useFlag, useSetCanary } from '../../api/resources';
import { LoadState } from '../../components/status';
import { CanaryControls } from '../../components/releases/canary-controls';
import { duration, percent, STATUS_LABEL, time, when } from '../../components/releases/format';
import { canaryHealth, HEALTH_BADGE } from '../../components/releases/health';
import { canaryRefusal } from '../../components/releases/access';
import { GuardrailStatus } from '../../components/releases/guardrail-status';
import { RollbackHistory } from '../../components/releases/rollback-history';
import { StageTimeline } from '../../components/releases/stage-timeline';
import { isEnvironment } from '../../api/environments';
import { isActive, type CanaryRecord } from '../../components/releases/types';
import { useProjectAccess } from '../../components/settings/access';

const POLL_MS = 2_000;

export default function FlagRelease() {
  const { projectId, flagKey } = useParams<{ projectId: string; flagKey: string }>();
  const search = new URLSearchParams(useSearch());
  const serviceId = search.get('serviceId') ?? '';
  const requested = search.get('environment');
  const environment = isEnvironment(requested) ? requested : 'production';
  const key = decodeURIComponent(flagKey);

  const flag = useFlag(key, serviceId, environment);
  const canary = useCanary(key, serviceId, environment, (current) => (current && isActive(current.status) ? POLL_MS : false));
  const showCanary = useSetCanary(key, serviceId, environment);
  const record = canary.data ?? undefined;
  const refusal = canaryRefusal(useProjectAccess(projectId));

  const startHref = `/projects/${encodeURIComponent(projectId)}/releases?${new URLSearchParams({ flag: key, serviceId, environment }).toString()}`;

  return (
    <>
      <p className="rs-crumbs">
        <Link href={`/projects/${encodeURIComponent(projectId)}/releases`}>Releases</Link> / {environment}
      </p>
      <h1>
        Release safety: <code>{key}</code>
      </h1>
      <LoadState loading={flag.loading} error={flag.error}>
        {null}
      </LoadState>
      <section aria-labelledby="canary" className="rs-panel">
        <h2 id="canary">Canary</h2>
        {canary.loading ? (
          <p role="status" className="muted">
            Loading…
          </p>
        ) : canary.error && !record ? (
          <p role="alert" className="form-error">
            {canary.error.message}
          </p>
        ) : !record ? (
          <p>
            This flag has had no canary in {environment}. <Link href={startHref}>Start a canary</Link>
          </p>
        ) : (
          <>
            <CanarySummary record={record} />
            <CanaryControls
              key={record.id}
              record={record}
              refusal={refusal}
              onChange={(next) => void showCanary(next)}
            />
            <StageTimeline record={record} />
            {!isActive(record.status) && (
              <p>
                <Link href={startHref}>Start another canary</Link>
              </p>
            )}
          </>
        )}
      </section>
      {flag.data && (
        <>
          <GuardrailStatus projectId={projectId} flag={flag.data} serviceId={serviceId} environment={environment} refreshKey={record?.status} />
          <RollbackHistory projectId={projectId} flagId={flag.data.id} refreshKey={record?.status} />
        </>
      )}
    </>
  );
}

function CanarySummary({ record }: { record: CanaryRecord }) {
  const config = record.config;
  const stage = record.currentStage;
  const health = canaryHealth(record);
  const evidence = health.evidence;
  return (
    <>
      {/* Announced when it changes (a stage starts, the pipeline ends); the numbers below are not. */}
      <p className="rs-summary" aria-live="polite">
        <span className={`rs-badge ${HEALTH_BADGE[health.state]}`}>{health.label}</span>{' '}
        {stage && isActive(record.status) ? `Stage ${stage.index + 1} at ${percent(stage.rolloutPercent)}, ${STATUS_LABEL[record.status].toLowerCase()}` : `Ended ${when(record.updatedAt)}`}
        {record.statusReason ? `: ${record.statusReason}` : ''}
      </p>
      {/* Full width and one line each at desktop widths, so the first check does not move what follows. */}
      <p>{health.explanation}</p>
      <p className="muted">
        {evidence
          ? `At the last gate check, ${time(evidence.checkedAt)}: ${evidence.gate.treatment.exposures.toLocaleString()} treatment / ${evidence.gate.control.exposures.toLocaleString()} control exposures (${config.minSamplesPerCohort.toLocaleString()} needed per cohort)`
          : 'No gate check of this stage yet'}
      </p>
      <dl className="rs-facts">
        <div>
          <dt>Soak left</dt>
          <dd className="rs-num">{record.status === 'running' ? duration(record.remainingSoakSeconds) : '—'}</dd>
        </div>
        <div>
          <dt>Ramp</dt>
          <dd>
            {percent(config.initialRolloutPercent)} → {percent(config.targetRolloutPercent)} by {percent(config.rampStepPercent)}, soak {config.soakPeriodMinutes} min
          </dd>
        </div>
        <div>
          <dt>Gates</dt>
          <dd>
            error rate +{(config.errorRateGateDelta * 100).toFixed(2)} pp, latency +{config.latencyGateDeltaMs} ms, ≥ {config.minSamplesPerCohort} exposures per cohort, α {config.alpha}
          </dd>
        </div>
        <div>
          <dt>On breach</dt>
          <dd>{config.autoRollbackOnBreach ? 'roll back automatically' : 'pause for a person'}</dd>
        </div>
        <div>
          <dt>Rule</dt>
          <dd>
            <code>{record.ruleId}</code>, started {when(record.createdAt)}
          </dd>
        </div>
      </dl>
    </>
  );
}
