/**
 * One flag's production guardrail (docs/guardrails.md): what is configured (the project's
 * settings and the auto-rollback limits), what the latest watch decided, and what auto-rollback
 * would decide about the latest change right now (a dry run: GET changes nothing).
 */
import { useEffect, useRef } from 'react';
import { Link } from 'wouter';
import { useAudit, useAutoRollbackState, useProject } from '../../api/resources';
import { LoadState } from '../status';
import { msDelta, ratePoints, when } from './format';
import { restoreSentence, useRollbacks } from './rollback-history';
import type { AuditEntry, Environment } from './types';

interface Props {
  projectId: string;
  flag: { id: string; key: string };
  serviceId: string;
  environment: Environment;
  /** Changes when the flag may have changed (a canary's status): the panel reads its state again. */
  refreshKey?: unknown;
}

export const VERDICT_LABEL: Record<string, string> = {
  passed: 'Passed',
  rolled_back: 'Rolled back',
  tripped: 'Tripped (not rolled back)',
  superseded: 'Superseded by a newer change',
};

export function GuardrailStatus({ projectId, flag, serviceId, environment, refreshKey }: Props) {
  const watched = environment === 'production';
  const project = useProject(projectId);
  const checks = useAudit({ projectId, resourceId: flag.id, action: 'guardrail.checked', limit: 5 }, refreshKey);
  const now = useAutoRollbackState(flag.key, serviceId, environment, { enabled: watched });
  const { history, rollbacks } = useRollbacks(projectId, flag.id, refreshKey);
  const loading = project.loading || checks.loading || now.loading || history.loading;
  const settings = project.data;
  const reloadNow = now.reload;
  const shownKey = useRef(refreshKey);
  useEffect(() => {
    // A canary's abort or rollback wrote a version after the dry run was read: judge again.
    if (shownKey.current === refreshKey) return;
    shownKey.current = refreshKey;
    void reloadNow();
  }, [refreshKey, reloadNow]);

  const latest = checks.data?.logs[0];
  const restore = rollbacks[0];
  const restoreVersion = (restore?.metadata as { version?: number } | undefined)?.version;
  // Auto-rollback never undoes a restore, so when a restore is the latest change there is nothing to judge.
  const restoreIsLatest = !!restore && (!now.data?.change || (restoreVersion !== undefined && now.data.change.version <= restoreVersion));
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
                    {restoreIsLatest ? (
                      'Nothing to judge: the latest change is a restore, which auto-rollback never undoes.'
                    ) : (
                      <>
                        {/* Not tripped includes too little evidence: the reason says which. */}
                        <span className={`rs-badge ${now.data.tripped ? 'rs-decision-fail' : ''}`}>{now.data.tripped ? 'Tripped' : 'Not tripped'}</span>{' '}
                        {now.data.change ? `latest change v${now.data.change.version} (${now.data.change.changeType}): ` : ''}
                        {now.data.reason}
                      </>
                    )}
                  </dd>
                </div>
              </>
            )}
            {restore && (
              <div>
                <dt>Latest restore</dt>
                <dd>{restoreSentence(restore)}</dd>
              </div>
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
