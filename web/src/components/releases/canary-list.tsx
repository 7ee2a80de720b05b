/**
 * The project's canaries, running and recent (GET /api/projects/{id}/canaries: active first,
 * then newest; each as its workflow last persisted it). Refreshes every 5 s while any is active.
 */
import { Link } from 'wouter';
import { useCanaries } from '../../api/resources';
import { LoadState } from '../status';
import { HEALTH_LABEL, percent, STATUS_LABEL, when } from './format';
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
        {list.data?.length ? (
          <div className="rs-scroll">
            <table>
              <caption className="visually-hidden">Canaries of this project, running first, then newest start first</caption>
              <thead>
                <tr>
                  <th scope="col">Flag</th>
                  <th scope="col">Service</th>
                  <th scope="col">Environment</th>
                  <th scope="col">Status</th>
                  <th scope="col">Stage</th>
                  <th scope="col">Health</th>
                  <th scope="col">Started</th>
                </tr>
              </thead>
              <tbody>
                {list.data.map((record) => (
                  <tr key={record.id}>
                    <td>
                      <Link href={flagReleaseHref(projectId, record.flagKey, record.serviceId, record.environment)}>{record.flagKey}</Link>
                    </td>
                    <td>{serviceNames.get(record.serviceId) ?? record.serviceId}</td>
                    <td>{record.environment}</td>
                    <td>
                      <span className={`rs-badge rs-status-${record.status}`}>{STATUS_LABEL[record.status]}</span>
                    </td>
                    <td className="rs-num">{stageText(record)}</td>
                    <td>{HEALTH_LABEL[record.health.status]}</td>
                    <td>{when(record.createdAt)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : (
          <p>No canary has been started in this project yet.</p>
        )}
      </LoadState>
    </section>
  );
}

function stageText(record: CanaryRecord): string {
  const stage = record.currentStage ?? record.completedStages.at(-1);
  return stage ? `${stage.index + 1} at ${percent(stage.rolloutPercent)}` : '—';
}
