import { useState } from 'react';
import { useParams } from 'wouter';
import { api, call, type paths } from '../../api/client';
import { useAlertChannels } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { Field, FormError, SelectField, SubmitButton, useAction, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { ConfirmButton } from '../../components/settings/confirm';
import { SecretDialog, type SecretsShown } from '../../components/settings/secret-once';
import { ActionOutcome, SettingsPage } from '../../components/settings/settings-page';
import { LoadState } from '../../components/status';

type CreateBody = NonNullable<paths['/api/orgs/{orgId}/alert-channels']['post']['requestBody']>['content']['application/json'];
type TestResult = paths['/api/orgs/{orgId}/alert-channels/{channelId}/test']['post']['responses'][200]['content']['application/json'];

const TYPES = [
  { value: 'chat', label: 'Chat (Slack-style incoming webhook)' },
  { value: 'paging', label: 'Paging (PagerDuty Events v2)' },
  { value: 'email', label: 'E-mail' },
  { value: 'webhook', label: 'Generic webhook (signed)' },
] as const;
type ChannelType = (typeof TYPES)[number]['value'];

function describeTest(result: TestResult): string {
  const detail = [result.statusCode !== null ? `HTTP ${result.statusCode}` : '', result.durationMs !== null ? `${result.durationMs} ms` : '', result.error ?? '']
    .filter(Boolean)
    .join(', ');
  const outcome: Record<TestResult['status'], string> = {
    delivered: 'Test delivered',
    failed: 'Test failed',
    skipped: 'Test skipped',
    queued: 'Test queued for sending',
    pending: 'Test not answered yet (will be retried)',
  };
  return `${outcome[result.status]}${detail ? `: ${detail}` : ''}`;
}

/**
 * Alert channels belong to the project's organization (every project in it alerts through them):
 * its members see them, its owners and admins create, test and delete them.
 */
export default function AlertChannels() {
  const { projectId } = useParams<{ projectId: string }>();
  const access = useProjectAccess(projectId);
  const orgId = access.project?.orgId;
  return (
    <SettingsPage
      title="Alert channels"
      projectId={projectId}
      intro={
        <p>
          Channels belong to the organization{access.org?.role ? ` “${access.org.name}”` : ''} and serve all its projects: release-safety and guardrail
          alerts go to each of them.
        </p>
      }
    >
      {!orgId ? (
        <p role="status" className="muted">
          Loading…
        </p>
      ) : !access.org?.role ? (
        <p>This project was shared with you; its organization's alert channels are visible to the organization's members only.</p>
      ) : (
        <ChannelSettings orgId={orgId} canManage={access.canManageOrg} />
      )}
    </SettingsPage>
  );
}

function ChannelSettings({ orgId, canManage }: { orgId: string; canManage: boolean }) {
  const channels = useAlertChannels(orgId);
  const [type, setType] = useState<ChannelType>('chat');
  const [results, setResults] = useState<Record<string, { ok: boolean; text: string }>>({});
  const [shown, setShown] = useState<SecretsShown | undefined>();
  const [notice, setNotice] = useState('');
  const action = useAction();

  const create = useSubmit(async (data, form) => {
    const text = (n: string) => String(data.get(n) ?? '').trim();
    const common = { name: text('name') };
    let body: CreateBody;
    if (type === 'chat') body = { type, ...common, url: text('url') };
    else if (type === 'paging') body = { type, ...common, routingKey: text('routingKey'), ...(text('url') ? { url: text('url') } : {}) };
    else if (type === 'email')
      body = {
        type,
        ...common,
        recipients: text('recipients')
          .split(/[\s,;]+/)
          .filter(Boolean),
      };
    else body = { type, ...common, url: text('url'), ...(text('secret') ? { secret: text('secret') } : {}) };
    const created = await call(api.POST('/api/orgs/{orgId}/alert-channels', { params: { path: { orgId } }, body }));
    form.reset();
    setNotice(
      created.type === 'email'
        ? `Channel "${created.name}" created: each recipient gets a mail to confirm; only confirmed addresses receive alerts.`
        : `Channel "${created.name}" created.`,
    );
    if (created.secret) setShown({ title: `Channel "${created.name}" created`, secrets: [{ label: 'Signing secret', value: created.secret }] });
    await channels.reload();
  });

  async function test(id: string) {
    let result: TestResult | undefined;
    const ok = await action.run(`test:${id}`, async () => {
      result = await call(api.POST('/api/orgs/{orgId}/alert-channels/{channelId}/test', { params: { path: { orgId, channelId: id } } }));
    });
    if (ok && result) setResults((r) => ({ ...r, [id]: { ok: result!.ok, text: describeTest(result!) } }));
  }

  async function remove(id: string, name: string) {
    const ok = await action.run(`delete:${id}`, () => call(api.DELETE('/api/orgs/{orgId}/alert-channels/{channelId}', { params: { path: { orgId, channelId: id } } })));
    if (ok) {
      setNotice(`Channel "${name}" was deleted.`);
      await channels.reload();
    }
  }

  const needsUrl = type !== 'email';
  return (
    <>
      {!canManage && <p className="muted">{NEEDS['org:manage']}</p>}
      <ActionOutcome notice={notice} error={action.error} />
      <section aria-labelledby="channels-heading">
        <h2 id="channels-heading">Channels</h2>
        <LoadState loading={channels.loading} error={channels.error}>
          <DataTable
            caption="The organization's alert channels"
            rows={channels.data?.channels ?? []}
            rowKey={(c) => c.id}
            empty="No alert channels yet."
            columns={[
              {
                header: 'Name',
                cell: (c) => (
                  <>
                    {c.name}
                    {!c.enabled && <span className="muted"> (disabled)</span>}
                  </>
                ),
              },
              { header: 'Type', cell: (c) => c.type },
              {
                header: 'Destination',
                className: 'st-break',
                cell: (c) =>
                  c.recipients ? (
                    <ul className="st-plain">
                      {c.recipients.map((r) => (
                        <li key={r.email}>
                          {r.email} <span className="muted">{r.confirmed ? '(confirmed)' : '(waiting for confirmation)'}</span>
                        </li>
                      ))}
                    </ul>
                  ) : (
                    <code>{c.destination}</code>
                  ),
              },
              {
                header: 'Test',
                cell: (c) => (
                  <>
                    {canManage && (
                      <button type="button" aria-label={`Send test to ${c.name}`} disabled={!!action.running} onClick={() => void test(c.id)}>
                        {action.running === `test:${c.id}` ? 'Sending…' : 'Send test'}
                      </button>
                    )}
                    {/* Space kept for the answer, so it does not push the table around when it arrives. */}
                    <p role="status" className={`st-test-result ${results[c.id] ? (results[c.id].ok ? 'st-ok' : 'st-bad') : ''}`}>
                      {results[c.id]?.text}
                    </p>
                  </>
                ),
              },
              {
                header: 'Actions',
                hideHeader: true,
                cell: (c) =>
                  canManage && (
                    <ConfirmButton
                      label={`Delete ${c.name}`}
                      text="Delete"
                      confirmLabel="Delete channel"
                      question="Alerts stop going there."
                      busy={action.running === `delete:${c.id}`}
                      onConfirm={() => void remove(c.id, c.name)}
                    />
                  ),
              },
            ]}
          />
        </LoadState>
      </section>

      {canManage && (
        <section aria-labelledby="create-channel-heading">
          <h2 id="create-channel-heading">Add a channel</h2>
          <form onSubmit={create.onSubmit} noValidate className="inline-form">
            <Field label="Channel name" name="name" required maxLength={200} autoComplete="off" error={create.error} />
            <SelectField label="Type" name="type" value={type} onChange={(e) => setType(e.target.value as ChannelType)} error={create.error}>
              {TYPES.map((t) => (
                <option key={t.value} value={t.value}>
                  {t.label}
                </option>
              ))}
            </SelectField>
            {type === 'paging' && <Field label="Routing key" name="routingKey" required maxLength={128} autoComplete="off" error={create.error} />}
            {needsUrl && (
              <Field
                label={type === 'paging' ? 'Events endpoint (optional)' : 'URL'}
                name="url"
                type="url"
                required={type !== 'paging'}
                maxLength={2048}
                error={create.error}
                hint={type === 'paging' ? 'Default https://events.pagerduty.com/v2/enqueue' : undefined}
              />
            )}
            {type === 'email' && (
              <Field label="Recipients" name="recipients" required error={create.error} hint="Up to 20 addresses, separated by commas or spaces; each confirms by mail." />
            )}
            {type === 'webhook' && (
              <Field
                label="Signing secret (optional)"
                name="secret"
                type="password"
                autoComplete="new-password"
                maxLength={512}
                error={create.error}
                hint="Leave empty to have one generated (shown once)."
              />
            )}
            <FormError error={create.error} fields={['name', 'url', 'routingKey', 'recipients', 'secret']} />
            <SubmitButton busy={create.busy}>Add channel</SubmitButton>
          </form>
        </section>
      )}
      <SecretDialog shown={shown} onClose={() => setShown(undefined)} />
    </>
  );
}
