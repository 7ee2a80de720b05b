import { useState } from 'react';
import { Link, useParams } from 'wouter';
import { api, call } from '../../api/client';
import { useWebhooks } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { Field, FormError, SubmitButton, useAction, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { ConfirmButton } from '../../components/settings/confirm';
import { SecretDialog, type SecretsShown } from '../../components/settings/secret-once';
import { ActionOutcome, SettingsPage } from '../../components/settings/settings-page';
import { EventChoices, eventsOf } from '../../components/settings/webhook-events';
import { WebhookHealth } from '../../components/settings/webhook-health';
import { LoadState } from '../../components/status';

/**
 * A project's webhooks (docs/api-reference.md#webhooks): create, pause or resume, delete; each
 * shows its health from its newest deliveries and links to its settings and delivery log.
 */
export default function Webhooks() {
  const { projectId } = useParams<{ projectId: string }>();
  const access = useProjectAccess(projectId);
  return (
    <SettingsPage title="Webhooks" projectId={projectId} refusal={!access.can('settings:manage') && NEEDS['settings:manage']}>
      <WebhookList projectId={projectId} />
    </SettingsPage>
  );
}

function WebhookList({ projectId }: { projectId: string }) {
  const webhooks = useWebhooks(projectId);
  const [shown, setShown] = useState<SecretsShown | undefined>();
  const [notice, setNotice] = useState('');
  const action = useAction();
  const webhookHref = (id: string) => `/projects/${encodeURIComponent(projectId)}/settings/webhooks/${encodeURIComponent(id)}`;

  const create = useSubmit(async (data, form) => {
    const secret = String(data.get('secret') ?? '');
    const created = await call(
      api.POST('/api/webhooks', {
        body: { projectId, url: String(data.get('url') ?? '').trim(), events: eventsOf(data), ...(secret ? { secret } : {}) },
      }),
    );
    form.reset();
    await webhooks.reload();
    if (secret) setNotice(`Webhook to ${created.url} created with the signing secret you gave.`);
    else
      setShown({
        title: 'Webhook created',
        secrets: [{ label: 'Signing secret', value: created.secret }],
        note: 'Verify each delivery with it (webhook-signature header, Standard Webhooks).',
      });
  });

  async function setActive(id: string, url: string, active: boolean) {
    const ok = await action.run(`active:${id}`, () => call(api.PATCH('/api/webhooks/{id}', { params: { path: { id } }, body: { active } })));
    if (ok) {
      setNotice(active ? `Deliveries to ${url} resumed.` : `Deliveries to ${url} paused.`);
      await webhooks.reload();
    }
  }

  async function remove(id: string, url: string) {
    const ok = await action.run(`delete:${id}`, () => call(api.DELETE('/api/webhooks/{id}', { params: { path: { id } } })));
    if (ok) {
      setNotice(`The webhook to ${url} and its delivery log were deleted.`);
      await webhooks.reload();
    }
  }

  return (
    <>
      <ActionOutcome notice={notice} error={action.error} />
      <section aria-labelledby="webhooks-heading">
        <h2 id="webhooks-heading">Endpoints</h2>
        <LoadState loading={webhooks.loading} error={webhooks.error}>
          <DataTable
            caption="Webhooks of this project"
            rows={webhooks.data?.webhooks ?? []}
            rowKey={(w) => w.id}
            empty="No webhooks yet."
            columns={[
              { header: 'URL', className: 'st-break', cell: (w) => <Link href={webhookHref(w.id)}>{w.url}</Link> },
              { header: 'Events', cell: (w) => w.events.join(', ') },
              { header: 'State', cell: (w) => (w.active ? 'Active' : 'Paused') },
              { header: 'Health', cell: (w) => <WebhookHealth webhookId={w.id} /> },
              {
                header: 'Actions',
                hideHeader: true,
                cell: (w) => (
                  <span className="st-row">
                    <Link href={webhookHref(w.id)} aria-label={`Deliveries and settings of ${w.url}`}>
                      Deliveries
                    </Link>
                    <button type="button" aria-label={`${w.active ? 'Pause' : 'Resume'} ${w.url}`} disabled={!!action.running} onClick={() => void setActive(w.id, w.url, !w.active)}>
                      {action.running === `active:${w.id}` ? 'Working…' : w.active ? 'Pause' : 'Resume'}
                    </button>
                    <ConfirmButton
                      label={`Delete ${w.url}`}
                      text="Delete"
                      confirmLabel="Delete webhook"
                      question="Its delivery log goes too."
                      busy={action.running === `delete:${w.id}`}
                      onConfirm={() => void remove(w.id, w.url)}
                    />
                  </span>
                ),
              },
            ]}
          />
        </LoadState>
      </section>

      <section aria-labelledby="create-webhook-heading">
        <h2 id="create-webhook-heading">Add a webhook</h2>
        <form onSubmit={create.onSubmit} noValidate className="inline-form">
          <Field label="Endpoint URL" name="url" type="url" required maxLength={2048} placeholder="https://example.com/hooks/flags" error={create.error} />
          <EventChoices error={create.error} />
          <Field
            label="Signing secret (optional)"
            name="secret"
            type="password"
            autoComplete="new-password"
            maxLength={512}
            error={create.error}
            hint="Leave empty to have one generated (shown once)."
          />
          <FormError error={create.error} fields={['url', 'events', 'secret']} />
          <SubmitButton busy={create.busy}>Add webhook</SubmitButton>
        </form>
      </section>
      <SecretDialog shown={shown} onClose={() => setShown(undefined)} />
    </>
  );
}
