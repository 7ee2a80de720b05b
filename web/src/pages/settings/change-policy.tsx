import { useState } from 'react';
import { useParams } from 'wouter';
import { api, call, type ApiError } from '../../api/client';
import { ENVIRONMENTS, type Environment } from '../../api/environments';
import { useChangePolicy } from '../../api/resources';
import { APPROVER_ROLES, type ChangePolicy } from '../../components/change-requests/model';
import { Field, FormError, SelectField, SubmitButton, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { ActionOutcome, SettingsPage } from '../../components/settings/settings-page';
import { LoadState } from '../../components/status';

type EnvironmentPolicy = NonNullable<ChangePolicy['environments'][Environment]>;

/** An environment without an entry needs no approval (docs/change-requests.md). */
const UNPROTECTED: EnvironmentPolicy = { requiredApprovals: 0, approverRoles: ['owner', 'admin'], allowSelfApproval: false, emergencyReduce: 'allow' };

/**
 * The project's change policy, per environment: how many approvals a change needs before it
 * applies, whose approvals count, whether authors may approve their own, and whether changes that
 * only reduce exposure (disable, roll back) may skip approval in an emergency. Everyone in the
 * project sees it; owners and admins change it.
 */
export default function ChangePolicySettings() {
  const { projectId } = useParams<{ projectId: string }>();
  const access = useProjectAccess(projectId);
  const policy = useChangePolicy(projectId);
  const canEdit = access.can('settings:manage');
  // Here, not in the form: a saved policy remounts the form.
  const [notice, setNotice] = useState('');
  return (
    <SettingsPage
      title="Change policy"
      projectId={projectId}
      intro={
        <>
          <p>Changes to a protected environment (one needing approvals) go through change requests: they apply once approved.</p>
          {!canEdit && <p>{NEEDS['change-policy']}</p>}
        </>
      }
    >
      <ActionOutcome notice={notice} />
      <LoadState loading={policy.loading} error={policy.error}>
        {/* Keyed on the answer: a saved policy restarts the form from what the server kept. */}
        {policy.data && (
          <PolicyForm
            key={JSON.stringify(policy.data)}
            projectId={projectId}
            policy={policy.data}
            canEdit={canEdit}
            onSaving={() => setNotice('')}
            onSaved={async () => {
              await policy.reload();
              setNotice('Change policy saved.');
            }}
          />
        )}
      </LoadState>
    </SettingsPage>
  );
}

function PolicyForm({
  projectId,
  policy,
  canEdit,
  onSaving,
  onSaved,
}: {
  projectId: string;
  policy: ChangePolicy;
  canEdit: boolean;
  onSaving: () => void;
  onSaved: () => Promise<void>;
}) {
  const save = useSubmit(async (data) => {
    onSaving();
    const environments = Object.fromEntries(
      ENVIRONMENTS.map((env): [Environment, EnvironmentPolicy] => [
        env,
        {
          requiredApprovals: Number(data.get(`environments.${env}.requiredApprovals`)),
          approverRoles: APPROVER_ROLES.filter((role) => data.get(`environments.${env}.approverRoles.${role}`) === 'on'),
          allowSelfApproval: data.get(`environments.${env}.allowSelfApproval`) === 'on',
          emergencyReduce: data.get(`environments.${env}.emergencyReduce`) === 'approve' ? 'approve' : 'allow',
        },
      ]),
    );
    await call(api.PUT('/api/projects/{id}/change-policy', { params: { path: { id: projectId } }, body: { environments } }));
    await onSaved();
  });
  return (
    <form onSubmit={save.onSubmit} noValidate>
      <fieldset disabled={!canEdit} className="fl-plain cr-policy">
        {ENVIRONMENTS.map((env) => (
          <EnvironmentFields key={env} environment={env} policy={policy.environments[env] ?? UNPROTECTED} error={save.error} />
        ))}
      </fieldset>
      <FormError error={save.error} fields={ENVIRONMENTS.flatMap((env) => ['requiredApprovals', 'approverRoles', 'allowSelfApproval', 'emergencyReduce'].map((f) => `environments.${env}.${f}`))} />
      {canEdit && <SubmitButton busy={save.busy}>Save change policy</SubmitButton>}
    </form>
  );
}

function EnvironmentFields({ environment, policy, error }: { environment: Environment; policy: EnvironmentPolicy; error?: ApiError }) {
  const name = (field: string) => `environments.${environment}.${field}`;
  const rolesProblem = error?.fieldError(name('approverRoles'));
  return (
    <fieldset className="inline-form">
      <legend>{environment}</legend>
      <Field
        label={`Required approvals in ${environment}`}
        name={name('requiredApprovals')}
        type="number"
        min={0}
        max={5}
        required
        defaultValue={policy.requiredApprovals}
        hint="0 to 5; 0 leaves the environment unprotected."
        error={error}
      />
      <fieldset className="st-choices">
        <legend>Who may approve in {environment}</legend>
        {APPROVER_ROLES.map((role) => (
          <label key={role}>
            <input type="checkbox" name={name(`approverRoles.${role}`)} defaultChecked={policy.approverRoles.includes(role)} /> {role}
          </label>
        ))}
        {rolesProblem && <p className="field-error">{rolesProblem}</p>}
      </fieldset>
      <label className="st-check">
        <input type="checkbox" name={name('allowSelfApproval')} defaultChecked={policy.allowSelfApproval} /> Authors may approve their own requests in {environment}
      </label>
      <SelectField
        label={`Emergency changes in ${environment}`}
        name={name('emergencyReduce')}
        defaultValue={policy.emergencyReduce ?? 'allow'}
        hint="Disabling, rolling back or lowering a rollout only reduces exposure."
        error={error}
      >
        <option value="allow">Apply at once, without approval</option>
        <option value="approve">Need approval like any change</option>
      </SelectField>
    </fieldset>
  );
}
