import { useState } from 'react';
import { Link, useParams } from 'wouter';
import { api, call, type paths } from '../../api/client';
import { useWebhook, useWebhookDeliveries } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { Field, FormError, SubmitButton, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { when } from '../../components/settings/format';
import { SettingsPage } from '../../components/settings/settings-page';
import { EventChoices, eventsOf } from '../../components/settings/webhook-events';
import { HealthText, webhookHealth } from '../../components/settings/webhook-health';
import { LoadState } from '../../components/status';

type DeliveryPage = paths['/api/webhooks/{id}/deliveries']['get']['responses'][200]['content']['application/json'];
type Delivery = DeliveryPage['deliveries'][number];

const PAGE = 25;

/** One webhook: its settings (URL, events, secret, active) and its delivery log with every attempt. */
export default function Webhook() {
  const { projectId, webhookId } = useParams<{ projectId: string; webhookId: string }>();
  const access = useProjectAccess(projectId);
  return (
    <SettingsPage
      title="Webhook"
      projectId={projectId}
      intro={
        <p>
          <Link href={`/projects/${encodeURIComponent(projectId)}/settings/webhooks`}>All webhooks</Link>
        </p>
      }
      refusal={!access.can('settings:manage') && NEEDS['settings:manage']}
    >
      <WebhookDetail webhookId={webhookId} />
    </SettingsPage>
  );
}

function WebhookDetail({ webhookId }: { webhookId: string }) {
  const webhook = useWebhook(webhookId);
  const [saved, setSaved] = useState('');

  const save = useSubmit(async (data) => {
    const secret = String(data.get('secret') ?? '');
    await call(
      api.PATCH('/api/webhooks/{id}', {
        params: { path: { id: webhookId } },
        body: { url: String(data.get('url') ?? '').trim(), events: eventsOf(data), active: data.get('active') === 'on', ...(secret ? { secret } : {}) },
      }),
    );
    setSaved(secret ? 'Saved, with the new signing secret.' : 'Saved.');
    await webhook.reload();
  });

  const w = webhook.data;
  return (
    <LoadState loading={webhook.loading} error={webhook.error}>
      {w && (
        <>
          <section aria-labelledby="webhook-settings-heading">
            <h2 id="webhook-settings-heading" className="st-break">
              {w.url}
            </h2>
            <p className="muted">{w.active ? 'Active' : 'Paused: no deliveries are made'}</p>
            {/* Keyed by the last change so the uncontrolled inputs show what was saved. */}
            <form key={w.updatedAt} onSubmit={save.onSubmit} noValidate className="inline-form" aria-label="Webhook settings">
              <Field label="Endpoint URL" name="url" type="url" required maxLength={2048} defaultValue={w.url} error={save.error} />
              <EventChoices checked={w.events} error={save.error} />
              <Field
                label="New signing secret (optional)"
                name="secret"
                type="password"
                autoComplete="new-password"
                maxLength={512}
                error={save.error}
                hint="Leave empty to keep the current one; it is never shown."
              />
              <div className="field">
                <label className="st-check">
                  <input type="checkbox" name="active" defaultChecked={w.active} /> Active (deliver events)
                </label>
              </div>
              <FormError error={save.error} fields={['url', 'events', 'secret']} />
              <p role="status" className="st-notice">
                {saved}
              </p>
              <SubmitButton busy={save.busy}>Save webhook</SubmitButton>
            </form>
          </section>
          <DeliveryLog webhookId={webhookId} />
        </>
      )}
    </LoadState>
  );
}

function DeliveryLog({ webhookId }: { webhookId: string }) {
  const log = useWebhookDeliveries(webhookId, PAGE);
  const deliveries = log.data?.pages.flatMap((page) => page.deliveries) ?? [];
  // A failed "older deliveries" keeps the pages shown and says so below them.
  const moreError = log.isFetchNextPageError ? log.error : null;

  return (
    <section aria-labelledby="deliveries-heading">
      <h2 id="deliveries-heading">Delivery log</h2>
      <p>
        <button type="button" aria-label="Refresh deliveries" onClick={() => void log.refetch()} disabled={log.isLoading || log.isRefetching}>
          {log.isRefetching ? 'Refreshing…' : 'Refresh deliveries'}
        </button>
      </p>
      <LoadState loading={log.isLoading} error={moreError ? undefined : (log.error ?? undefined)}>
        {/* With no deliveries the table's own sentence says so. */}
        {deliveries.length > 0 && (
          <p>
            Health: <HealthText health={webhookHealth(deliveries)} />
          </p>
        )}
        <DataTable
          caption="Deliveries, newest first"
          rows={deliveries}
          rowKey={(d) => d.id}
          empty="No deliveries yet: they appear when a flag of this project changes."
          columns={[
            { header: 'Time', cell: (d) => when(d.createdAt) },
            {
              header: 'Event',
              cell: (d) => (
                <>
                  <code>{d.event}</code>
                  {d.flagKey && <span className="muted"> {d.flagKey}</span>}
                </>
              ),
            },
            { header: 'Status', cell: (d) => <span className={`st-delivery-${d.status}`}>{d.status}</span> },
            { header: 'Attempts', cell: (d) => d.attemptCount },
            { header: 'Response', cell: (d) => d.lastStatusCode ?? '—' },
            { header: 'Details', cell: (d) => <Attempts delivery={d} /> },
          ]}
        />
        {log.hasNextPage && (
          <button type="button" onClick={() => void log.fetchNextPage()} disabled={log.isFetchingNextPage}>
            {log.isFetchingNextPage ? 'Loading…' : 'Older deliveries'}
          </button>
        )}
        {moreError && (
          <p role="alert" className="form-error">
            {moreError.message}
          </p>
        )}
      </LoadState>
    </section>
  );
}

function Attempts({ delivery }: { delivery: Delivery }) {
  return (
    <details>
      <summary>Attempts</summary>
      <ol>
        {delivery.attempts.map((a) => (
          <li key={a.attempt}>
            {when(a.startedAt)}: {a.outcome}
            {a.statusCode !== null && `, HTTP ${a.statusCode}`}
            {a.durationMs !== null && `, ${a.durationMs} ms`}
            {a.error && ` (${a.error})`}
          </li>
        ))}
      </ol>
    </details>
  );
}
