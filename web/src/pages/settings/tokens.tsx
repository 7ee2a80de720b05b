import { useState } from 'react';
import { useParams } from 'wouter';
import { api, call } from '../../api/client';
import { useProjectTokens } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { Field, FormError, SubmitButton, useAction, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { ConfirmButton } from '../../components/settings/confirm';
import { day, when } from '../../components/settings/format';
import { SecretDialog, type SecretsShown } from '../../components/settings/secret-once';
import { ActionOutcome, SettingsPage } from '../../components/settings/settings-page';
import { LoadState } from '../../components/status';

const PERMISSIONS = [
  { name: 'read', label: 'Read', hint: 'evaluate and list flags and services' },
  { name: 'write', label: 'Write', hint: 'create and change flags' },
  { name: 'delete', label: 'Delete', hint: 'delete flags' },
] as const;
const SCOPES = [
  ...PERMISSIONS,
  { name: 'manage_settings', label: 'Manage settings', hint: 'API tokens, webhooks' },
  { name: 'manage_members', label: 'Manage members', hint: 'members and invitations' },
] as const;
type Scope = (typeof SCOPES)[number]['name'];

/**
 * Project API tokens (docs/api-reference.md#project-api-tokens): opaque tokens with permissions, or
 * JWTs with scopes; the secret is shown once.
 */
export default function Tokens() {
  const { projectId } = useParams<{ projectId: string }>();
  const access = useProjectAccess(projectId);
  return (
    <SettingsPage title="API tokens" projectId={projectId} refusal={!access.can('settings:manage') && NEEDS['settings:manage']}>
      <TokenSettings projectId={projectId} />
    </SettingsPage>
  );
}

function TokenSettings({ projectId }: { projectId: string }) {
  const tokens = useProjectTokens(projectId);
  const [kind, setKind] = useState<'opaque' | 'jwt'>('opaque');
  const [shown, setShown] = useState<SecretsShown | undefined>();
  const [notice, setNotice] = useState('');
  const action = useAction();

  const create = useSubmit(async (data, form) => {
    const name = String(data.get('name') ?? '').trim();
    const checked = (n: string) => data.get(n) === 'on';
    let created;
    if (kind === 'jwt') {
      const scopes = SCOPES.map((s) => s.name).filter(checked) as Scope[];
      created = await call(api.POST('/api/projects/{id}/tokens', { params: { path: { id: projectId } }, body: { name, tokenType: 'jwt', scopes } }));
    } else {
      const expires = String(data.get('expiresAt') ?? '');
      const permissions = { read: checked('read'), write: checked('write'), delete: checked('delete') };
      created = await call(
        api.POST('/api/projects/{id}/tokens', {
          params: { path: { id: projectId } },
          // The date input gives a day; the token lives until the end of it in the reader's zone.
          body: { name, tokenType: 'opaque', permissions, ...(expires ? { expiresAt: new Date(`${expires}T23:59:59`).toISOString() } : {}) },
        }),
      );
    }
    form.reset();
    setKind('opaque');
    const secrets = created.value
      ? [{ label: 'Token', value: created.value }]
      : [
          { label: 'Access token', value: created.accessToken ?? '' },
          { label: 'Refresh token', value: created.refreshToken ?? '' },
        ];
    setShown({
      title: `Token "${created.token.name}" created`,
      secrets,
      note: created.value
        ? 'Send it as "Authorization: Bearer <token>".'
        : 'The access token lasts 24 hours; exchange the refresh token (30 days) at /api/projects/<id>/tokens/refresh for a new pair.',
    });
    await tokens.reload();
  });

  async function revoke(id: string, name: string) {
    const ok = await action.run(id, () => call(api.DELETE('/api/projects/{id}/tokens/{tokenId}', { params: { path: { id: projectId, tokenId: id } } })));
    if (ok) {
      setNotice(`Token "${name}" was revoked; it stops working at once.`);
      await tokens.reload();
    }
  }

  return (
    <>
      <ActionOutcome notice={notice} error={action.error} />
      <section aria-labelledby="tokens-heading">
        <h2 id="tokens-heading">Live tokens</h2>
        <LoadState loading={tokens.loading} error={tokens.error}>
          <DataTable
            caption="Project API tokens (their secrets are never shown again)"
            rows={tokens.data?.tokens ?? []}
            rowKey={(t) => t.id}
            empty="No API tokens yet."
            columns={[
              { header: 'Name', cell: (t) => t.name },
              { header: 'Kind', cell: (t) => (t.tokenType === 'jwt' ? 'JWT' : 'Opaque') },
              {
                header: 'Grants',
                cell: (t) =>
                  t.permissions
                    ? Object.entries(t.permissions)
                        .filter(([, on]) => on)
                        .map(([p]) => p)
                        .join(', ')
                    : (t.scopes ?? []).join(', '),
              },
              { header: 'Created', cell: (t) => day(t.createdAt) },
              { header: 'Expires', cell: (t) => day(t.expiresAt) },
              { header: 'Last used', cell: (t) => (t.tokenType === 'jwt' ? '—' : when(t.lastUsedAt)) },
              {
                header: 'Actions',
                hideHeader: true,
                cell: (t) => (
                  <ConfirmButton
                    label={`Revoke ${t.name}`}
                    text="Revoke"
                    confirmLabel="Revoke now"
                    question="Anything using it stops working."
                    busy={action.running === t.id}
                    onConfirm={() => void revoke(t.id, t.name)}
                  />
                ),
              },
            ]}
          />
        </LoadState>
      </section>

      <section aria-labelledby="create-token-heading">
        <h2 id="create-token-heading">Create a token</h2>
        <form onSubmit={create.onSubmit} noValidate className="inline-form">
          <Field label="Token name" name="name" required maxLength={100} autoComplete="off" error={create.error} hint="Say where it is used, e.g. “checkout CI”." />
          <fieldset className="st-choices">
            <legend>Kind</legend>
            <label>
              <input type="radio" name="tokenType" value="opaque" checked={kind === 'opaque'} onChange={() => setKind('opaque')} /> Opaque token with
              permissions
            </label>
            <label>
              <input type="radio" name="tokenType" value="jwt" checked={kind === 'jwt'} onChange={() => setKind('jwt')} /> JWT with scopes (24 h
              access, 30 d refresh)
            </label>
          </fieldset>
          <fieldset className="st-choices">
            <legend>{kind === 'jwt' ? 'Scopes' : 'Permissions'}</legend>
            {(kind === 'jwt' ? SCOPES : PERMISSIONS).map((p) => (
              <label key={p.name}>
                <input type="checkbox" name={p.name} defaultChecked={p.name === 'read'} /> {p.label} <span className="muted">({p.hint})</span>
              </label>
            ))}
            {(create.error?.fieldError('permissions') ?? create.error?.fieldError('scopes')) && (
              <p className="field-error">{create.error?.fieldError('permissions') ?? create.error?.fieldError('scopes')}</p>
            )}
          </fieldset>
          {kind === 'opaque' && <Field label="Expires on (optional)" name="expiresAt" type="date" error={create.error} hint="Without a date the token lives until revoked." />}
          <FormError error={create.error} fields={['name', 'permissions', 'scopes', 'expiresAt']} />
          <SubmitButton busy={create.busy}>Create token</SubmitButton>
        </form>
      </section>
      <SecretDialog shown={shown} onClose={() => setShown(undefined)} />
    </>
  );
}
