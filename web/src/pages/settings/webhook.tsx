import { useState } from 'react';
import { Link, useParams } from 'wouter';
import { api, call, type paths } from '../../api/client';
import { useWebhook, useWebhookDeliveries } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { Field, FormError, SubmitButton, useAction, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { when } from '../../components/settings/format';
import { SettingsPage } from '../../components/settings/settings-page';
import { EventChoices, eventsOf } from '../../components/settings/webhook-events';
import { HealthText, webhookHealth } from '../../components/settings/webhook-health';
import { LoadState } from '../../components/status';

type DeliveryPage = paths['/api/webhooks/{id}/deliveries']['get']['responses'][200]['content']['application/json'];
type Delivery = DeliveryPage['deliveries'][number];
type TestOutcome = paths['/api/webhooks/{id}/test']['post']['responses'][200]['content']['application/json'];

const PAGE = 25;

/**
 * One webhook: its state with its health from the delivery log (active alone does not say that
 * deliveries arrive), a test send, its settings (URL, events, secret, active) and its delivery log
 * with every attempt.
 */
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
            <p>
              {w.active ? 'Active' : 'Paused: no deliveries are made'}
              {' · Health: '}
              <CurrentHealth webhookId={webhookId} />
            </p>
            <TestSend webhookId={webhookId} />
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

/** The health the delivery log shows (the same query as the log below, read once). */
function CurrentHealth({ webhookId }: { webhookId: string }) {
  const log = useWebhookDeliveries(webhookId, PAGE);
  if (log.error) return <span className="muted">unknown ({log.error.message})</span>;
  if (!log.data) return <span className="muted">checking…</span>;
  return <HealthText health={webhookHealth(log.data.pages.flatMap((page) => page.deliveries))} />;
}

function outcomeText(outcome: TestOutcome): string {
  const answer = outcome.statusCode !== null ? `HTTP ${outcome.statusCode}` : 'no answer';
  const took = outcome.durationMs !== null ? ` in ${outcome.durationMs} ms` : '';
  if (outcome.delivered) return `Test event delivered (${answer}${took}).`;
  if (outcome.status === 'skipped') return `Test event not sent: ${outcome.error ?? 'the webhook is paused'}.`;
  if (outcome.status === 'pending') return 'Test event sent; no answer yet. The delivery log shows it when it settles.';
  return `Test event failed${took}: ${outcome.error ?? answer}.`;
}

/** Sends one signed webhook.test event and says what the endpoint answered; the log then shows it. */
function TestSend({ webhookId }: { webhookId: string }) {
  const log = useWebhookDeliveries(webhookId, PAGE);
  const action = useAction();
  const [outcome, setOutcome] = useState<TestOutcome | undefined>();

  async function send() {
    setOutcome(undefined);
    await action.run('test', async () => {
      setOutcome(await call(api.POST('/api/webhooks/{id}/test', { params: { path: { id: webhookId } } })));
      await log.refetch();
    });
  }

  return (
    <div className="st-row">
      <button type="button" onClick={() => void send()} disabled={!!action.running}>
        {action.running ? 'Sending…' : 'Send test event'}
      </button>
      {/* A failed send is a finding about the endpoint, shown like an error. */}
      <p role="status" className={outcome && !outcome.delivered ? 'form-error' : 'st-notice'}>
        {outcome && outcomeText(outcome)}
      </p>
      {action.error && (
        <p role="alert" className="form-error">
          {action.error.message}
        </p>
      )}
    </div>
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
        <DataTable
          caption="Deliveries, newest first"
          rows={deliveries}
          rowKey={(d) => d.id}
          empty="No deliveries yet: they appear when a flag of this project changes, or send a test event."
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
