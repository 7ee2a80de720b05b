/**
 * One flag's production guardrail (docs/guardrails.md): what is configured (the project's
 * settings and the auto-rollback limits), what the latest watch decided, and what auto-rollback
 * would decide about the latest change right now (a dry run: GET changes nothing).
 */
import { Link } from 'wouter';
import { useAudit, useAutoRollbackState, useProject } from '../../api/resources';
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
  const project = useProject(projectId);
  const checks = useAudit({ projectId, resourceId: flag.id, action: 'guardrail.checked', limit: 5 });
  const now = useAutoRollbackState(flag.key, serviceId, environment, { enabled: watched });
  const loading = project.loading || checks.loading || now.loading;
  const settings = project.data;

  const latest = checks.data?.logs[0];
  return (
    <section aria-labelledby="guardrail" className="rs-panel">
      <h2 id="guardrail">Guardrail</h2>
      {!watched && <p>Guardrails watch production only: changes in {environment} are not judged.</p>}
      <LoadState loading={loading} error={project.error ?? checks.error ?? now.error}>
        {settings && (
          <dl className="rs-facts">
            <div>
              <dt>Automatic rollback</dt>
              <dd>{settings.guardrailAutoRollback ? 'On: a tripped change is rolled back' : 'Off: a tripped change is only reported'}</dd>
            </div>
            <div>
              <dt>Watch window</dt>
              <dd>{settings.guardrailWindowMinutes} min after each production change</dd>
            </div>
            {now.data && (
              <>
                <div>
                  <dt>Limits</dt>
                  <dd>
                    error rate {ratePoints(now.data.limits.maxErrorRateDelta)}, p99 latency {msDelta(now.data.limits.maxLatencyDeltaMs)}
                  </dd>
                </div>
                <div>
                  <dt>Now (dry run)</dt>
                  <dd>
                    {/* Not tripped includes too little evidence: the reason says which. */}
                    <span className={`rs-badge ${now.data.tripped ? 'rs-decision-fail' : ''}`}>{now.data.tripped ? 'Tripped' : 'Not tripped'}</span>{' '}
                    {now.data.change ? `latest change v${now.data.change.version} (${now.data.change.changeType}): ` : ''}
                    {now.data.reason}
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
