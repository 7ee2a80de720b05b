import { useState } from 'react';
import { api, call } from '../../api/client';
import { usePersonalTokens } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { Field, FormError, SelectField, SubmitButton, useAction, useSubmit } from '../../components/forms';
import { ConfirmButton } from '../../components/settings/confirm';
import { day, when } from '../../components/settings/format';
import { SecretDialog, type SecretsShown } from '../../components/settings/secret-once';
import { ActionOutcome, SettingsPage } from '../../components/settings/settings-page';
import { LoadState } from '../../components/status';

const TIERS = [
  { value: 'read', label: 'Read: read flags and services in your projects' },
  { value: 'write', label: 'Write: also change flags and services' },
  { value: 'admin', label: 'Admin: also members and settings, as far as your role allows' },
] as const;
const EXPIRY_DAYS = [7, 30, 90, 180, 365] as const;

/**
 * Personal access tokens (docs/api-reference.md#personal-access-tokens): act as you, limited by
 * tier and by your roles; the secret is shown once.
 */
export default function AccountTokens() {
  const tokens = usePersonalTokens();
  const [tier, setTier] = useState<(typeof TIERS)[number]['value']>('read');
  const [shown, setShown] = useState<SecretsShown | undefined>();
  const [notice, setNotice] = useState('');
  const action = useAction();

  const create = useSubmit(async (data, form) => {
    const created = await call(
      api.POST('/api/users/me/personal-tokens', {
        body: {
          name: String(data.get('name') ?? '').trim(),
          tier,
          expiresInDays: Number(data.get('expiresInDays')),
          allowOwnerActions: tier === 'admin' && data.get('allowOwnerActions') === 'on',
        },
      }),
    );
    form.reset();
    setTier('read');
    setShown({ title: `Personal token "${created.token.name}" created`, secrets: [{ label: 'Token', value: created.value }], note: 'Send it as "Authorization: Bearer <token>".' });
    await tokens.reload();
  });

  async function rotate(id: string, name: string) {
    let value = '';
    const ok = await action.run(`rotate:${id}`, async () => {
      value = (await call(api.POST('/api/users/me/personal-tokens/{id}/rotate', { params: { path: { id } }, body: {} }))).value;
    });
    if (!ok) return;
    setShown({ title: `Token "${name}" rotated`, secrets: [{ label: 'Token', value }], note: 'The old secret stopped working.' });
    await tokens.reload();
  }

  async function revoke(id: string, name: string) {
    const ok = await action.run(`revoke:${id}`, () => call(api.DELETE('/api/users/me/personal-tokens/{id}', { params: { path: { id } } })));
    if (ok) {
      setNotice(`Token "${name}" was revoked.`);
      await tokens.reload();
    }
  }

  return (
    <SettingsPage title="Personal tokens" intro={<p>Personal tokens act as you in scripts and the CLI, limited by their tier and by your role in each project.</p>}>
      <ActionOutcome notice={notice} error={action.error} />
      <section aria-labelledby="personal-tokens-heading">
        <h2 id="personal-tokens-heading">Your tokens</h2>
        <LoadState loading={tokens.loading} error={tokens.error}>
          <DataTable
            caption="Your personal tokens"
            rows={tokens.data?.tokens ?? []}
            rowKey={(t) => t.id}
            empty="No personal tokens yet."
            columns={[
              { header: 'Name', cell: (t) => t.name },
              { header: 'Tier', cell: (t) => `${t.tier}${t.allowOwnerActions ? ' (owner actions)' : ''}` },
              { header: 'Ends in', cell: (t) => <code>…{t.lastFour}</code> },
              { header: 'Expires', cell: (t) => (t.expired ? <strong>expired {day(t.expiresAt)}</strong> : day(t.expiresAt)) },
              { header: 'Last used', cell: (t) => when(t.lastUsedAt) },
              {
                header: 'Actions',
                hideHeader: true,
                cell: (t) => (
                  <span className="st-row">
                    <button type="button" aria-label={`Rotate ${t.name}`} disabled={!!action.running} onClick={() => void rotate(t.id, t.name)}>
                      {action.running === `rotate:${t.id}` ? 'Working…' : 'Rotate'}
                    </button>
                    <ConfirmButton
                      label={`Revoke ${t.name}`}
                      text="Revoke"
                      confirmLabel="Revoke now"
                      question="Scripts using it stop working."
                      busy={action.running === `revoke:${t.id}`}
                      onConfirm={() => void revoke(t.id, t.name)}
                    />
                  </span>
                ),
              },
            ]}
          />
        </LoadState>
      </section>

      <section aria-labelledby="create-personal-token-heading">
        <h2 id="create-personal-token-heading">Create a personal token</h2>
        <form onSubmit={create.onSubmit} noValidate className="inline-form">
          <Field label="Token name" name="name" required maxLength={100} autoComplete="off" error={create.error} />
          <fieldset className="st-choices">
            <legend>Tier</legend>
            {TIERS.map((t) => (
              <label key={t.value}>
                <input type="radio" name="tier" value={t.value} checked={tier === t.value} onChange={() => setTier(t.value)} /> {t.label}
              </label>
            ))}
          </fieldset>
          <SelectField label="Expires after" name="expiresInDays" defaultValue="90" error={create.error}>
            {EXPIRY_DAYS.map((d) => (
              <option key={d} value={d}>
                {d} days
              </option>
            ))}
          </SelectField>
          <div className="field">
            <label className="st-check">
              <input type="checkbox" name="allowOwnerActions" disabled={tier !== 'admin'} aria-describedby="owner-actions-hint" /> Allow owner actions
            </label>
            <p id="owner-actions-hint" className="hint">
              Deleting projects and changing owners; only on the admin tier.
            </p>
          </div>
          <FormError error={create.error} fields={['name', 'tier', 'expiresInDays', 'allowOwnerActions']} />
          <SubmitButton busy={create.busy}>Create personal token</SubmitButton>
        </form>
      </section>
      <SecretDialog shown={shown} onClose={() => setShown(undefined)} />
    </SettingsPage>
  );
}
