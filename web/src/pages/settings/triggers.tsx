import { useState } from 'react';
import { useParams } from 'wouter';
import { api, call } from '../../api/client';
import { useApi } from '../../api/use-api';
import { Field, FormError, SubmitButton, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { ConfirmButton } from '../../components/settings/confirm';
import { day, when } from '../../components/settings/format';
import { SecretDialog, type SecretsShown } from '../../components/settings/secret-once';
import { SettingsTabs } from '../../components/settings/section-nav';
import { useAction } from '../../components/settings/use-action';
import { LoadState } from '../../components/status';

const ACTIONS = ['disable', 'enable', 'toggle'] as const;
const ENVIRONMENTS = ['development', 'staging', 'production'] as const;
/** Flags offered per service; a service with more is narrowed by typing part of the key. */
const FLAG_CHOICES = 100;

/**
 * Trigger URLs (docs/api-reference.md#triggers): anyone holding one enables, disables or toggles
 * one flag in one environment, so incident tooling can act without credentials. A trigger belongs
 * to a flag of a service: pick them, then list, create (the URL is shown once) and revoke.
 */
export default function Triggers() {
  const { projectId } = useParams<{ projectId: string }>();
  const access = useProjectAccess(projectId);
  const services = useApi(() => call(api.GET('/api/services', { params: { query: { projectId, limit: 100 } } })), [projectId]);
  const [serviceId, setServiceId] = useState('');
  const [search, setSearch] = useState('');
  const [flagKey, setFlagKey] = useState('');
  const service = serviceId || services.data?.services[0]?.id || '';
  const flags = useApi(
    async () =>
      service
        ? call(api.GET('/api/flags', { params: { query: { projectId, serviceId: service, limit: FLAG_CHOICES, ...(search ? { search } : {}) } } }))
        : undefined,
    [projectId, service, search],
  );
  const keys = (flags.data?.flags ?? []).map((f) => f.key).filter((k): k is string => !!k);
  const flag = keys.includes(flagKey) ? flagKey : (keys[0] ?? '');

  return (
    <>
      <h1>Triggers</h1>
      <SettingsTabs projectId={projectId} />
      <p>A trigger URL enables, disables or toggles one flag in one environment when called with POST, without any other credential.</p>
      <LoadState loading={services.loading} error={services.error}>
        {services.data?.services.length ? (
          <div className="st-filters">
            <div className="field">
              <label htmlFor="trigger-service">Service</label>
              <select
                id="trigger-service"
                value={service}
                onChange={(e) => {
                  setServiceId(e.target.value);
                  setFlagKey('');
                }}
              >
                {services.data.services.map((s) => (
                  <option key={s.id} value={s.id}>
                    {s.name}
                  </option>
                ))}
              </select>
            </div>
            <div className="field">
              <label htmlFor="trigger-flag-search">Find a flag</label>
              <input id="trigger-flag-search" type="search" value={search} maxLength={200} onChange={(e) => setSearch(e.target.value)} />
            </div>
            <div className="field">
              <label htmlFor="trigger-flag">Flag</label>
              <select id="trigger-flag" value={flag} disabled={!keys.length} onChange={(e) => setFlagKey(e.target.value)}>
                {keys.length ? (
                  keys.map((k) => (
                    <option key={k} value={k}>
                      {k}
                    </option>
                  ))
                ) : (
                  <option value="">{flags.loading ? 'Loading…' : 'No flags'}</option>
                )}
              </select>
            </div>
          </div>
        ) : (
          <p>This project has no services yet; triggers belong to a flag of a service.</p>
        )}
      </LoadState>
      {flags.error && (
        <p role="alert" className="form-error">
          {flags.error.message}
        </p>
      )}
      {service && flag && <FlagTriggers key={`${service}/${flag}`} serviceId={service} flagKey={flag} canWrite={access.can('flags:write')} />}
    </>
  );
}

function FlagTriggers({ serviceId, flagKey, canWrite }: { serviceId: string; flagKey: string; canWrite: boolean }) {
  const triggers = useApi(() => call(api.GET('/api/flags/{key}/triggers', { params: { path: { key: flagKey }, query: { serviceId } } })), [flagKey, serviceId]);
  const [shown, setShown] = useState<SecretsShown | undefined>();
  const [notice, setNotice] = useState('');
  const action = useAction();

  const create = useSubmit(async (data, form) => {
    const created = await call(
      api.POST('/api/flags/{key}/triggers', {
        params: { path: { key: flagKey } },
        body: {
          serviceId,
          name: String(data.get('name') ?? '').trim(),
          action: String(data.get('action')) as (typeof ACTIONS)[number],
          environment: String(data.get('environment')) as (typeof ENVIRONMENTS)[number],
        },
      }),
    );
    form.reset();
    setShown({
      title: `Trigger "${created.name}" created`,
      secrets: [{ label: 'Trigger URL', value: created.url }],
      note: `POST to it to ${created.action} ${flagKey} in ${created.environment}; the URL is the credential.`,
    });
    await triggers.reload();
  });

  async function revoke(id: string, name: string) {
    const ok = await action.run(id, () =>
      call(api.DELETE('/api/flags/{key}/triggers/{triggerId}', { params: { path: { key: flagKey, triggerId: id }, query: { serviceId } } })),
    );
    if (ok) {
      setNotice(`Trigger "${name}" was revoked; its URL answers 404 from now on.`);
      await triggers.reload();
    }
  }

  return (
    <>
      <p role="status" className="st-notice">
        {notice}
      </p>
      {action.error && (
        <p role="alert" className="form-error">
          {action.error.message}
        </p>
      )}
      <section aria-labelledby="triggers-heading">
        <h2 id="triggers-heading">
          Triggers of <code>{flagKey}</code>
        </h2>
        <LoadState loading={triggers.loading} error={triggers.error}>
          {triggers.data?.triggers.length ? (
            <div className="st-scroll">
              <table>
                <caption className="visually-hidden">Active triggers of this flag (their URLs are never shown again)</caption>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Action</th>
                    <th scope="col">Environment</th>
                    <th scope="col">Runs</th>
                    <th scope="col">Last run</th>
                    <th scope="col">Created</th>
                    <th scope="col">
                      <span className="visually-hidden">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {triggers.data.triggers.map((t) => (
                    <tr key={t.id}>
                      <td>{t.name}</td>
                      <td>{t.action}</td>
                      <td>{t.environment}</td>
                      <td>{t.executionCount}</td>
                      <td>{when(t.lastExecutedAt)}</td>
                      <td>{day(t.createdAt)}</td>
                      <td>
                        {canWrite && (
                          <ConfirmButton
                            label={`Revoke ${t.name}`}
                            text="Revoke"
                            confirmLabel="Revoke now"
                            question="Its URL stops working."
                            busy={action.running === t.id}
                            onConfirm={() => void revoke(t.id, t.name)}
                          />
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          ) : (
            <p>No triggers for this flag.</p>
          )}
        </LoadState>
      </section>
      {canWrite ? (
        <section aria-labelledby="create-trigger-heading">
          <h2 id="create-trigger-heading">Create a trigger</h2>
          <form onSubmit={create.onSubmit} noValidate className="inline-form">
            <Field label="Trigger name" name="name" required maxLength={200} autoComplete="off" error={create.error} hint="E.g. “kill switch for on-call”." />
            <div className="field">
              <label htmlFor="trigger-action">Action</label>
              <select id="trigger-action" name="action" defaultValue="disable">
                {ACTIONS.map((a) => (
                  <option key={a} value={a}>
                    {a}
                  </option>
                ))}
              </select>
            </div>
            <div className="field">
              <label htmlFor="trigger-environment">Environment</label>
              <select id="trigger-environment" name="environment" defaultValue="production">
                {ENVIRONMENTS.map((e) => (
                  <option key={e} value={e}>
                    {e}
                  </option>
                ))}
              </select>
            </div>
            <FormError error={create.error} fields={['name', 'action', 'environment']} />
            <SubmitButton busy={create.busy}>Create trigger</SubmitButton>
          </form>
        </section>
      ) : (
        <p className="muted">{NEEDS['flags:write']}</p>
      )}
      <SecretDialog shown={shown} onClose={() => setShown(undefined)} />
    </>
  );
}
