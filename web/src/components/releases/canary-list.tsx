/**
 * The project's canaries, running and recent. There is no project-wide list route: the audit
 * trail's `canary.start` entries (resource the flag, metadata the service and environment) name
 * the pipelines, and each flag's GET /canary answers its active or latest one. The list reads the
 * latest starts, one row per flag, service and environment, and refreshes every 5 s while any
 * of them is active.
 */
import { Link } from 'wouter';
import { api, ApiError, call } from '../../api/client';
import { useApi } from '../../api/use-api';
import { LoadState } from '../status';
import { HEALTH_LABEL, percent, STATUS_LABEL, when } from './format';
import { flagReleaseHref, isActive, type CanaryRecord, type Environment } from './types';
import { usePoll } from './use-poll';

/** How many starts are read, and how many distinct pipelines are shown (one GET each). */
const STARTS_READ = 100;
const SHOWN = 20;

interface Row {
  flagKey: string;
  serviceId: string;
  environment: Environment;
  record?: CanaryRecord;
}

async function loadCanaries(projectId: string): Promise<Row[]> {
  const { logs } = await call(api.GET('/api/audit', { params: { query: { projectId, action: 'canary.start', limit: STARTS_READ } } }));
  const seen = new Set<string>();
  const rows: Row[] = [];
  for (const entry of logs) {
    const m = entry.metadata as { serviceId?: string; environment?: Environment };
    if (!entry.resourceName || !m.serviceId || !m.environment) continue;
    const id = `${m.serviceId}/${m.environment}/${entry.resourceName}`;
    if (seen.has(id)) continue;
    seen.add(id);
    rows.push({ flagKey: entry.resourceName, serviceId: m.serviceId, environment: m.environment });
    if (rows.length === SHOWN) break;
  }
  return Promise.all(
    rows.map(async (row) => {
      try {
        const record = await call(api.GET('/api/flags/{key}/canary', { params: { path: { key: row.flagKey }, query: { serviceId: row.serviceId, environment: row.environment } } }));
        return { ...row, record };
      } catch (error) {
        // The flag was deleted since (404): its row stays, without a pipeline to show.
        if (error instanceof ApiError && error.status === 404) return row;
        throw error;
      }
    }),
  );
}

export function CanaryList({ projectId, serviceNames }: { projectId: string; serviceNames: Map<string, string> }) {
  const list = useApi(() => loadCanaries(projectId), [projectId]);
  usePoll(list.reload, 5_000, !!list.data?.some((r) => r.record && isActive(r.record.status)));
  return (
    <section aria-labelledby="canaries" className="rs-panel">
      <h2 id="canaries">Canaries</h2>
      <LoadState loading={list.loading} error={list.error}>
        {list.data?.length ? (
          <div className="rs-scroll">
            <table>
              <caption className="visually-hidden">Canaries of this project, newest start first</caption>
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
                {list.data.map((row) => (
                  <tr key={`${row.serviceId}/${row.environment}/${row.flagKey}`}>
                    <td>
                      <Link href={flagReleaseHref(projectId, row.flagKey, row.serviceId, row.environment)}>{row.flagKey}</Link>
                    </td>
                    <td>{serviceNames.get(row.serviceId) ?? row.serviceId}</td>
                    <td>{row.environment}</td>
                    <td>{row.record ? <span className={`rs-badge rs-status-${row.record.status}`}>{STATUS_LABEL[row.record.status]}</span> : 'flag deleted'}</td>
                    <td className="rs-num">{row.record ? stageText(row.record) : '—'}</td>
                    <td>{row.record ? HEALTH_LABEL[row.record.health.status] : '—'}</td>
                    <td>{when(row.record?.createdAt)}</td>
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
