import { useState } from 'react';
import { Link, useLocation, useParams, useSearch } from 'wouter';
import { api, call } from '../../api/client';
import { ENVIRONMENTS, type Environment } from '../../api/environments';
import { useFlagTriggers, useFlags, useServiceTriggers, useServices } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { Field, FormError, SelectField, SubmitButton, useAction, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { ConfirmButton } from '../../components/settings/confirm';
import { day, when } from '../../components/settings/format';
import { SecretDialog, type SecretsShown } from '../../components/settings/secret-once';
import { ActionOutcome, SettingsPage } from '../../components/settings/settings-page';
import { LoadState } from '../../components/status';
import { useDebounced } from '../../components/use-debounced';
import { flagTriggersHref } from '../../links';

const ACTIONS = ['disable', 'enable', 'toggle'] as const;
/** Flags offered per service; a service with more is narrowed by typing part of the key. */
const FLAG_CHOICES = 100;
/** The flag search asks the server once the user pauses typing. */
const SEARCH_DELAY_MS = 300;

/**
 * Trigger URLs (docs/api-reference.md#triggers): anyone holding one enables, disables or toggles
 * one flag in one environment, so incident tooling can act without credentials. A trigger belongs
 * to a flag of a service: the service's triggers are listed across its flags; pick a flag to
 * create one (the URL is shown once) or revoke one.
 */
export default function Triggers() {
  const { projectId } = useParams<{ projectId: string }>();
  const access = useProjectAccess(projectId);
  const services = useServices(projectId);
  // The service and flag live in the address, so a flag's page links to its triggers.
  const address = new URLSearchParams(useSearch());
  const [location, navigate] = useLocation();
  const serviceId = address.get('serviceId') ?? '';
  const flagKey = address.get('flag') ?? '';
  const choose = (chosen: { serviceId: string; flag: string }) =>
    navigate(`${location}?${new URLSearchParams(Object.entries(chosen).filter(([, value]) => value))}`, { replace: true });
  const [search, setSearch] = useState('');
  const service = serviceId || services.data?.services[0]?.id || '';
  const searched = useDebounced(search.trim(), SEARCH_DELAY_MS);
  const flags = useFlags({ projectId, serviceId: service, limit: FLAG_CHOICES, ...(searched ? { search: searched } : {}) }, { enabled: !!service });
  const listed = (flags.data?.flags ?? []).map((f) => f.key).filter((k): k is string => !!k);
  // The flag the address names is offered even when it is not among the first FLAG_CHOICES.
  const keys = flagKey && !searched && flags.data && !listed.includes(flagKey) ? [flagKey, ...listed] : listed;
  const flag = keys.includes(flagKey) ? flagKey : (keys[0] ?? '');
  const serviceTriggers = useServiceTriggers(service);

  return (
    <SettingsPage
      title="Triggers"
      projectId={projectId}
      intro={<p>A trigger URL enables, disables or toggles one flag in one environment when called with POST, without any other credential.</p>}
    >
      <LoadState loading={services.loading} error={services.error}>
        {services.data?.services.length ? (
          <div className="st-filters">
            <SelectField
              label="Service"
              name="serviceId"
              value={service}
              onChange={(e) => choose({ serviceId: e.target.value, flag: '' })}
            >
              {services.data.services.map((s) => (
                <option key={s.id} value={s.id}>
                  {s.name}
                </option>
              ))}
            </SelectField>
            <Field label="Find a flag" name="search" type="search" value={search} maxLength={200} onChange={(e) => setSearch(e.target.value)} />
            <SelectField label="Flag" name="flagKey" value={flag} disabled={!keys.length} onChange={(e) => choose({ serviceId: service, flag: e.target.value })}>
              {keys.length ? (
                keys.map((k) => (
                  <option key={k} value={k}>
                    {k}
                  </option>
                ))
              ) : (
                <option value="">{flags.loading ? 'Loading…' : 'No flags'}</option>
              )}
            </SelectField>
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
      {service && (
        <section aria-labelledby="service-triggers-heading">
          <h2 id="service-triggers-heading">All triggers of {services.data?.services.find((s) => s.id === service)?.name ?? 'this service'}</h2>
          <LoadState loading={serviceTriggers.loading} error={serviceTriggers.error}>
            <DataTable
              caption="Active triggers of every flag of this service, by flag"
              rows={serviceTriggers.data?.triggers ?? []}
              rowKey={(t) => t.id}
              empty="No flag of this service has a trigger."
              columns={[
                {
                  header: 'Flag',
                  cell: (t) => (
                    <Link href={flagTriggersHref(projectId, t.flagKey, service)}>
                      <code className="fl-key" title={t.flagKey}>
                        {t.flagKey}
                      </code>
                    </Link>
                  ),
                },
                { header: 'Name', cell: (t) => t.name },
                { header: 'Action', cell: (t) => t.action },
                { header: 'Environment', cell: (t) => t.environment },
                { header: 'Runs', cell: (t) => t.executionCount },
                { header: 'Last run', cell: (t) => when(t.lastExecutedAt) },
              ]}
            />
            {serviceTriggers.data?.hasMore && <p className="muted">Only the first 100 are listed: pick a flag to see all of its triggers.</p>}
          </LoadState>
        </section>
      )}
      {service && flag && (
        <FlagTriggers key={`${service}/${flag}`} serviceId={service} flagKey={flag} canWrite={access.can('flags:write')} onChanged={serviceTriggers.reload} />
      )}
    </SettingsPage>
  );
}

function FlagTriggers({ serviceId, flagKey, canWrite, onChanged }: { serviceId: string; flagKey: string; canWrite: boolean; onChanged: () => Promise<void> }) {
  const triggers = useFlagTriggers(flagKey, serviceId);
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
          environment: String(data.get('environment')) as Environment,
        },
      }),
    );
    form.reset();
    setShown({
      title: `Trigger "${created.name}" created`,
      secrets: [{ label: 'Trigger URL', value: created.url }],
      note: `POST to it to ${created.action} ${flagKey} in ${created.environment}; the URL is the credential.`,
    });
    await Promise.all([triggers.reload(), onChanged()]);
  });

  async function revoke(id: string, name: string) {
    const ok = await action.run(id, () =>
      call(api.DELETE('/api/flags/{key}/triggers/{triggerId}', { params: { path: { key: flagKey, triggerId: id }, query: { serviceId } } })),
    );
    if (ok) {
      setNotice(`Trigger "${name}" was revoked; its URL answers 404 from now on.`);
      await Promise.all([triggers.reload(), onChanged()]);
    }
  }

  return (
    <>
      <ActionOutcome notice={notice} error={action.error} />
      <section aria-labelledby="triggers-heading">
        <h2 id="triggers-heading">
          Triggers of <code>{flagKey}</code>
        </h2>
        <LoadState loading={triggers.loading} error={triggers.error}>
          <DataTable
            caption="Active triggers of this flag (their URLs are never shown again)"
            rows={triggers.data?.triggers ?? []}
            rowKey={(t) => t.id}
            empty="No triggers for this flag."
            columns={[
              { header: 'Name', cell: (t) => t.name },
              { header: 'Action', cell: (t) => t.action },
              { header: 'Environment', cell: (t) => t.environment },
              { header: 'Runs', cell: (t) => t.executionCount },
              { header: 'Last run', cell: (t) => when(t.lastExecutedAt) },
              { header: 'Created', cell: (t) => day(t.createdAt) },
              {
                header: 'Actions',
                hideHeader: true,
                cell: (t) =>
                  canWrite && (
                    <ConfirmButton
                      label={`Revoke ${t.name}`}
                      text="Revoke"
                      confirmLabel="Revoke now"
                      question="Its URL stops working."
                      busy={action.running === t.id}
                      onConfirm={() => void revoke(t.id, t.name)}
                    />
                  ),
              },
            ]}
          />
        </LoadState>
      </section>
      {canWrite ? (
        <section aria-labelledby="create-trigger-heading">
          <h2 id="create-trigger-heading">Create a trigger</h2>
          <form onSubmit={create.onSubmit} noValidate className="inline-form">
            <Field label="Trigger name" name="name" required maxLength={200} autoComplete="off" error={create.error} hint="E.g. “kill switch for on-call”." />
            <SelectField label="Action" name="action" defaultValue="disable" error={create.error}>
              {ACTIONS.map((a) => (
                <option key={a} value={a}>
                  {a}
                </option>
              ))}
            </SelectField>
            <SelectField label="Environment" name="environment" defaultValue="production" error={create.error}>
              {ENVIRONMENTS.map((e) => (
                <option key={e} value={e}>
                  {e}
                </option>
              ))}
            </SelectField>
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
