import { useState } from 'react';
import { useParams } from 'wouter';
import { api, call } from '../../api/client';
import { ENVIRONMENTS, isEnvironment, type Environment } from '../../api/environments';
import { useFlags, useSdkEndpoints, useService } from '../../api/resources';
import { Field, FormError, RefusedButton, SelectField, SubmitButton, useSubmit } from '../../components/forms';
import { CopyButton } from '../../components/sdk/copy-button';
import { SnippetTabs } from '../../components/sdk/snippet-tabs';
import type { FlagType } from '../../components/sdk/snippets';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { SecretDialog, type SecretsShown } from '../../components/settings/secret-once';
import { LoadState } from '../../components/status';

const TOKEN_PLACEHOLDER = '<bound token>';
const EXAMPLE_FLAG = 'my-flag';

/**
 * Connecting an SDK to one service: its ids, this deployment's endpoints, a token bound to the
 * service and an environment (docs/api-reference.md#project-api-tokens), and OpenFeature snippets
 * with all of it filled in (docs/local-evaluation.md).
 */
export default function ConnectSdk() {
  const { projectId, serviceId } = useParams<{ projectId: string; serviceId: string }>();
  const access = useProjectAccess(projectId);
  const service = useService(serviceId);
  const endpoints = useSdkEndpoints(projectId);
  const [environment, setEnvironment] = useState<Environment>('development');
  const flags = useFlags({ projectId, serviceId, environment, limit: 1 });
  const [token, setToken] = useState<{ value: string; environment: Environment } | undefined>();
  const [shown, setShown] = useState<SecretsShown | undefined>();

  const create = useSubmit(async (data) => {
    const name = String(data.get('name') ?? '').trim();
    const created = await call(
      api.POST('/api/projects/{id}/tokens', {
        params: { path: { id: projectId } },
        // Read only: SDKs evaluate, and a browser token is public.
        body: { name, tokenType: 'opaque', permissions: { read: true }, scope: { serviceId, environment } },
      }),
    );
    const value = created.value ?? '';
    setToken({ value, environment });
    setShown({
      title: `Token "${created.token.name}" created`,
      secrets: [{ label: 'Token', value }],
      note: `It reads only this service in ${environment}; the snippets below use it until you leave this page.`,
    });
  });

  const flag = flags.data?.flags[0];
  const serviceName = service.data?.name ?? 'Service';
  return (
    <>
      <h1>Connect an SDK to {serviceName}</h1>
      <LoadState loading={service.loading} error={service.error}>
        {service.data === null && <p role="alert">This service does not exist or is not in one of your projects.</p>}
      </LoadState>

      <section aria-labelledby="ids-heading">
        <h2 id="ids-heading">Identifiers</h2>
        <dl className="facts">
          <Copyable term="Project id" value={projectId} />
          <Copyable term="Service id" value={serviceId} />
          {ENVIRONMENTS.map((e) => (
            <Copyable key={e} term={`Environment (${e})`} value={e} />
          ))}
        </dl>
      </section>

      <section aria-labelledby="endpoints-heading">
        <h2 id="endpoints-heading">Endpoints</h2>
        <LoadState loading={endpoints.loading} error={endpoints.error}>
          {endpoints.data && (
            <dl className="facts">
              <Copyable term="OFREP base URL" value={endpoints.data.ofrepBaseUrl} />
              <Copyable term="Data plane" value={endpoints.data.dataUrl} />
              {endpoints.data.ingestUrl && <Copyable term="Ingest (browser events)" value={endpoints.data.ingestUrl} />}
              {endpoints.data.flagd && (
                <>
                  <Copyable term="flagd host" value={endpoints.data.flagd.host} />
                  <Copyable term="flagd sync port (in-process)" value={String(endpoints.data.flagd.syncPort)} />
                  <Copyable term="flagd evaluation port (RPC)" value={String(endpoints.data.flagd.evaluationPort)} />
                </>
              )}
            </dl>
          )}
        </LoadState>
      </section>

      <section aria-labelledby="token-heading">
        <h2 id="token-heading">Create a token for this SDK</h2>
        <p className="hint">A read-only project API token bound to this service and one environment: SDKs send it as their bearer token or flagd selector.</p>
        {access.can('settings:manage') ? (
          <form onSubmit={create.onSubmit} noValidate className="inline-form">
            {/* Keyed by the name: the default follows the service once it has loaded. */}
            <Field key={serviceName} label="Token name" name="name" required maxLength={100} autoComplete="off" defaultValue={`${serviceName} SDK`} error={create.error} />
            <SelectField label="Environment" name="environment" value={environment} onChange={(e) => isEnvironment(e.target.value) && setEnvironment(e.target.value)} error={create.error}>
              {ENVIRONMENTS.map((e) => (
                <option key={e} value={e}>
                  {e}
                </option>
              ))}
            </SelectField>
            <FormError error={create.error} fields={['name']} />
            <SubmitButton busy={create.busy}>Create token</SubmitButton>
          </form>
        ) : (
          <RefusedButton className="primary" reason={NEEDS['settings:manage']}>
            Create token
          </RefusedButton>
        )}
        {token && token.environment !== environment && <p className="hint">The snippets use the token created for {token.environment}.</p>}
      </section>

      <section aria-labelledby="snippets-heading">
        <h2 id="snippets-heading">Snippets</h2>
        {!token && <p className="hint">Create a token above to fill it in; until then the snippets show {TOKEN_PLACEHOLDER}.</p>}
        {!flag?.key && <p className="hint">This service has no flag in {environment} yet: the snippets evaluate “{EXAMPLE_FLAG}”.</p>}
        {endpoints.data && (
          <SnippetTabs
            values={{
              ofrepBaseUrl: endpoints.data.ofrepBaseUrl,
              flagd: endpoints.data.flagd,
              token: token?.value ?? TOKEN_PLACEHOLDER,
              flagKey: flag?.key ?? EXAMPLE_FLAG,
              flagType: (flag?.type as FlagType | undefined) ?? 'boolean',
            }}
          />
        )}
      </section>
      <SecretDialog shown={shown} onClose={() => setShown(undefined)} />
    </>
  );
}

function Copyable({ term, value }: { term: string; value: string }) {
  return (
    <>
      <dt>{term}</dt>
      <dd>
        <code>{value}</code> <CopyButton value={value} label={`Copy ${term.toLowerCase()}`} />
      </dd>
    </>
  );
}
