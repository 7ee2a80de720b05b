/**
 * The project's production guardrail (docs/guardrails.md): its settings (owners and admins may
 * change them), the latest checks with their verdicts (audit `guardrail.checked`), and the
 * project's rollbacks (canary, guardrail, by hand) with why.
 */
import { Link, useParams } from 'wouter';
import { api, call } from '../../api/client';
import { useAudit, useProject } from '../../api/resources';
import { Field, FormError, RefusedButton, SubmitButton, useSubmit } from '../../components/forms';
import { guardrailSettingsRefusal } from '../../components/releases/access';
import { useProjectAccess } from '../../components/settings/access';
import { DataTable } from '../../components/data-table';
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
  const refusal = guardrailSettingsRefusal(useProjectAccess(projectId));
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
              {/* Read-only for those who may not change them: the values stay readable. */}
              <fieldset disabled={!!refusal} className="fl-plain">
                <div className="field rs-check">
                  <input type="checkbox" id="guardrailAutoRollback" name="guardrailAutoRollback" defaultChecked={project.data.guardrailAutoRollback} />
                  <label htmlFor="guardrailAutoRollback">Roll back a tripped change automatically (otherwise only notify)</label>
                </div>
                <Field label="Watch window (minutes)" name="guardrailWindowMinutes" type="number" inputMode="numeric" min={1} max={1440} step={1} defaultValue={project.data.guardrailWindowMinutes} error={error} hint="1-1440: the minutes compared before and after a change" />
              </fieldset>
              <FormError error={error} fields={['guardrailWindowMinutes', 'guardrailAutoRollback']} />
              {refusal ? <RefusedButton reason={refusal}>Save guardrail settings</RefusedButton> : <SubmitButton busy={busy}>Save guardrail settings</SubmitButton>}
            </form>
          )}
        </LoadState>
      </section>
      <section aria-labelledby="guardrail-checks" className="rs-panel">
        <h2 id="guardrail-checks">Latest checks</h2>
        <LoadState loading={checks.loading} error={checks.error}>
          <DataTable
            frame="rs-scroll"
            caption="Guardrail checks, newest first"
            rows={(checks.data?.logs ?? []).map((entry) => ({ entry, m: entry.metadata as CheckMeta }))}
            rowKey={({ entry }) => entry.id}
            empty="No production change has been judged yet: a check runs a watch window after each change."
            columns={[
              { header: 'Checked', cell: ({ entry }) => when(entry.timestamp) },
              {
                header: 'Flag',
                cell: ({ entry, m }) =>
                  m.serviceId && m.environment && entry.resourceName ? (
                    <Link href={flagReleaseHref(projectId, entry.resourceName, m.serviceId, m.environment)}>{entry.resourceName}</Link>
                  ) : (
                    entry.resourceName
                  ),
              },
              { header: 'Change', cell: ({ m }) => `v${m.version}${m.newVersionNumber ? ` → rolled back as v${m.newVersionNumber}` : ''}` },
              { header: 'Verdict', cell: ({ m }) => <span className={`rs-badge rs-verdict-${m.verdict ?? 'unknown'}`}>{VERDICT_LABEL[m.verdict ?? ''] ?? m.verdict}</span> },
              {
                header: 'Error-rate / p99 delta',
                className: 'rs-num',
                cell: ({ m }) => (m.delta ? `${ratePoints(m.delta.errorRateDelta ?? null)} / ${msDelta(m.delta.latencyP99DeltaMs ?? null)}` : '—'),
              },
              { header: 'Reason', cell: ({ m }) => m.reason },
            ]}
          />
        </LoadState>
      </section>
      <RollbackHistory projectId={projectId} />
    </>
  );
}
