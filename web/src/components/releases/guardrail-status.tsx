/**
 * One flag's production guardrail (docs/guardrails.md): what is configured (the project's
 * settings and the auto-rollback limits), what the latest watch decided, and what auto-rollback
 * would decide about the latest change right now (a dry run: GET changes nothing).
 */
import { Link } from 'wouter';
import { api, call } from '../../api/client';
import { useApi } from '../../api/use-api';
import { LoadState } from '../status';
import { msDelta, ratePoints, when } from './format';
import type { AuditEntry, Environment } from './types';

interface Props {
  projectId: string;
  flag: { id: string; key: string };
  serviceId: string;
  environment: Environment;
}

export const VERDICT_LABEL: Record<string, string> = {
  passed: 'Passed',
  rolled_back: 'Rolled back',
  tripped: 'Tripped (not rolled back)',
  superseded: 'Superseded by a newer change',
};

export function GuardrailStatus({ projectId, flag, serviceId, environment }: Props) {
  const watched = environment === 'production';
  const data = useApi(async () => {
    const [project, checks, now] = await Promise.all([
      call(api.GET('/api/projects/{id}', { params: { path: { id: projectId } } })),
      call(api.GET('/api/audit', { params: { query: { projectId, resourceId: flag.id, action: 'guardrail.checked', limit: 5 } } })),
      watched ? call(api.GET('/api/flags/{key}/auto-rollback', { params: { path: { key: flag.key }, query: { serviceId, environment } } })) : Promise.resolve(undefined),
    ]);
    return { project, checks: checks.logs, now };
  }, [projectId, flag.id, flag.key, serviceId, environment]);

  const latest = data.data?.checks[0];
  return (
    <section aria-labelledby="guardrail" className="rs-panel">
      <h2 id="guardrail">Guardrail</h2>
      {!watched && <p>Guardrails watch production only: changes in {environment} are not judged.</p>}
      <LoadState loading={data.loading} error={data.error}>
        {data.data && (
          <dl className="rs-facts">
            <div>
              <dt>Automatic rollback</dt>
              <dd>{data.data.project.guardrailAutoRollback ? 'On: a tripped change is rolled back' : 'Off: a tripped change is only reported'}</dd>
            </div>
            <div>
              <dt>Watch window</dt>
              <dd>{data.data.project.guardrailWindowMinutes} min after each production change</dd>
            </div>
            {data.data.now && (
              <>
                <div>
                  <dt>Limits</dt>
                  <dd>
                    error rate {ratePoints(data.data.now.limits.maxErrorRateDelta)}, p99 latency {msDelta(data.data.now.limits.maxLatencyDeltaMs)}
                  </dd>
                </div>
                <div>
                  <dt>Now (dry run)</dt>
                  <dd>
                    {/* Not tripped includes too little evidence: the reason says which. */}
                    <span className={`rs-badge ${data.data.now.tripped ? 'rs-decision-fail' : ''}`}>{data.data.now.tripped ? 'Tripped' : 'Not tripped'}</span>{' '}
                    {data.data.now.change ? `latest change v${data.data.now.change.version} (${data.data.now.change.changeType}): ` : ''}
                    {data.data.now.reason}
                  </dd>
                </div>
              </>
            )}
            <div>
              <dt>Latest check</dt>
              <dd>{latest ? <CheckSummary entry={latest} /> : 'No production change of this flag has been judged yet.'}</dd>
            </div>
          </dl>
        )}
      </LoadState>
      <p>
        <Link href={`/projects/${encodeURIComponent(projectId)}/releases/guardrails`}>All guardrail checks of the project</Link>
      </p>
    </section>
  );
}

export function CheckSummary({ entry }: { entry: AuditEntry }) {
  const m = entry.metadata as { verdict?: string; reason?: string; version?: number };
  return (
    <>
      <span className={`rs-badge rs-verdict-${m.verdict ?? 'unknown'}`}>{VERDICT_LABEL[m.verdict ?? ''] ?? m.verdict}</span> v{m.version} at {when(entry.timestamp)}: {m.reason}
    </>
  );
}
