/**
 * The project's canaries, running and recent (GET /api/projects/{id}/canaries: active first,
 * then newest; each as its workflow last persisted it). Refreshes every 5 s while any is active.
 */
import { Link } from 'wouter';
import { useCanaries } from '../../api/resources';
import { DataTable } from '../data-table';
import { LoadState } from '../status';
import { percent, STATUS_LABEL, when } from './format';
import { canaryHealth, HEALTH_BADGE } from './health';
import { flagReleaseHref, isActive, type CanaryRecord } from './types';

/** Pipelines shown: the running ones and the latest ended ones. */
const SHOWN = 20;

const POLL_MS = 5_000;

export function CanaryList({ projectId, serviceNames }: { projectId: string; serviceNames: Map<string, string> }) {
  const list = useCanaries(projectId, SHOWN, (records) => (records?.some((record) => isActive(record.status)) ? POLL_MS : false));
  return (
    <section aria-labelledby="canaries" className="rs-panel">
      <h2 id="canaries">Canaries</h2>
      <LoadState loading={list.loading} error={list.error}>
        <DataTable
          frame="rs-scroll"
          caption="Canaries of this project, running first, then newest start first"
          rows={list.data ?? []}
          rowKey={(record) => record.id}
          empty="No canary has been started in this project yet."
          columns={[
            { header: 'Flag', cell: (record) => <Link href={flagReleaseHref(projectId, record.flagKey, record.serviceId, record.environment)}>{record.flagKey}</Link> },
            { header: 'Service', cell: (record) => serviceNames.get(record.serviceId) ?? record.serviceId },
            { header: 'Environment', cell: (record) => record.environment },
            { header: 'Status', cell: statusCell },
            { header: 'Stage', className: 'rs-num', cell: stageText },
            { header: 'Started', cell: (record) => when(record.createdAt) },
          ]}
        />
      </LoadState>
    </section>
  );
}

function stageText(record: CanaryRecord): string {
  const stage = record.currentStage ?? record.completedStages.at(-1);
  return stage ? `${stage.index + 1} at ${percent(stage.rolloutPercent)}` : '—';
}

/** An active pipeline's status with its health; an ended one's health is its status (completed, rolled back, aborted). */
function statusCell(record: CanaryRecord) {
  const health = canaryHealth(record);
  return (
    <>
      {isActive(record.status) && `${STATUS_LABEL[record.status]}: `}
      <span className={`rs-badge ${HEALTH_BADGE[health.state]}`}>{health.label}</span>
    </>
  );
}
