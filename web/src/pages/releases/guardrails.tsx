/**
 * The project's production guardrail (docs/guardrails.md): its settings (owners and admins may
 * change them), the latest checks with their verdicts (audit `guardrail.checked`), and the
 * project's rollbacks (canary, guardrail, by hand) with why.
 */
import { Link, useParams } from 'wouter';
import { api, call } from '../../api/client';
import { useAudit, useProject } from '../../api/resources';
import { Field, FormError, SubmitButton, useSubmit } from '../../components/forms';
import { LoadState } from '../../components/status';
import { msDelta, ratePoints, when } from '../../components/releases/format';
import { VERDICT_LABEL } from '../../components/releases/guardrail-status';
import { RollbackHistory } from '../../components/releases/rollback-history';
import { flagReleaseHref, type Environment } from '../../components/releases/types';

const CHECKS_SHOWN = 50;

interface CheckMeta {
  serviceId?: string;
  environment?: Environment;
  version?: number;
  verdict?: string;
  reason?: string;
  windowMinutes?: number;
  limits?: { maxErrorRateDelta: number; maxLatencyDeltaMs: number };
  delta?: { errorRateDelta?: number; latencyP99DeltaMs?: number | null };
  newVersionNumber?: number;
}

export default function Guardrails() {
  const { projectId } = useParams<{ projectId: string }>();
  const project = useProject(projectId);
  const checks = useAudit({ projectId, action: 'guardrail.checked', limit: CHECKS_SHOWN });
  const { busy, error, onSubmit } = useSubmit(async (data) => {
    const minutes = Number(String(data.get('guardrailWindowMinutes') ?? ''));
    await call(
      api.PATCH('/api/projects/{id}', {
        params: { path: { id: projectId } },
        body: { guardrailAutoRollback: data.get('guardrailAutoRollback') === 'on', guardrailWindowMinutes: Number.isFinite(minutes) ? minutes : (null as unknown as number) },
      }),
    );
    await project.reload();
  });

  return (
    <>
      <p className="rs-crumbs">
        <Link href={`/projects/${encodeURIComponent(projectId)}/releases`}>Releases</Link>
      </p>
      <h1>Guardrails</h1>
      <p>After every change of a flag in production that changes what is served, a watch waits for the window to fill, compares errors and latency before and after, and rolls the change back when it tripped.</p>
      <section aria-labelledby="guardrail-settings">
        <LoadState loading={project.loading} error={project.error}>
          {project.data && (
            <form onSubmit={onSubmit} noValidate className="inline-form" aria-labelledby="guardrail-settings" key={`${project.data.guardrailAutoRollback}-${project.data.guardrailWindowMinutes}`}>
              <h2 id="guardrail-settings">Settings</h2>
              <div className="field rs-check">
                <input type="checkbox" id="guardrailAutoRollback" name="guardrailAutoRollback" defaultChecked={project.data.guardrailAutoRollback} />
                <label htmlFor="guardrailAutoRollback">Roll back a tripped change automatically (otherwise only notify)</label>
              </div>
              <Field label="Watch window (minutes)" name="guardrailWindowMinutes" type="number" inputMode="numeric" min={1} max={1440} step={1} defaultValue={project.data.guardrailWindowMinutes} error={error} hint="1-1440: the minutes compared before and after a change" />
              <FormError error={error} fields={['guardrailWindowMinutes', 'guardrailAutoRollback']} />
              <SubmitButton busy={busy}>Save guardrail settings</SubmitButton>
            </form>
          )}
        </LoadState>
      </section>
      <section aria-labelledby="guardrail-checks" className="rs-panel">
        <h2 id="guardrail-checks">Latest checks</h2>
        <LoadState loading={checks.loading} error={checks.error}>
          {checks.data?.logs.length ? (
            <div className="rs-scroll">
              <table>
                <caption className="visually-hidden">Guardrail checks, newest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Checked</th>
                    <th scope="col">Flag</th>
                    <th scope="col">Change</th>
                    <th scope="col">Verdict</th>
                    <th scope="col">Error-rate / p99 delta</th>
                    <th scope="col">Reason</th>
                  </tr>
                </thead>
                <tbody>
                  {checks.data.logs.map((entry) => {
                    const m = entry.metadata as CheckMeta;
                    return (
                      <tr key={entry.id}>
                        <td>{when(entry.timestamp)}</td>
                        <td>
                          {m.serviceId && m.environment && entry.resourceName ? (
                            <Link href={flagReleaseHref(projectId, entry.resourceName, m.serviceId, m.environment)}>{entry.resourceName}</Link>
                          ) : (
                            entry.resourceName
                          )}
                        </td>
                        <td>
                          v{m.version}
                          {m.newVersionNumber ? ` → rolled back as v${m.newVersionNumber}` : ''}
                        </td>
                        <td>
                          <span className={`rs-badge rs-verdict-${m.verdict ?? 'unknown'}`}>{VERDICT_LABEL[m.verdict ?? ''] ?? m.verdict}</span>
                        </td>
                        <td className="rs-num">{m.delta ? `${ratePoints(m.delta.errorRateDelta ?? null)} / ${msDelta(m.delta.latencyP99DeltaMs ?? null)}` : '—'}</td>
                        <td>{m.reason}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </div>
          ) : (
            <p>No production change has been judged yet: a check runs a watch window after each change.</p>
          )}
        </LoadState>
      </section>
      <RollbackHistory projectId={projectId} />
    </>
  );
}
