import { useState } from 'react';
import { api, call } from '../../api/client';
import { useConnections } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { useAction } from '../../components/forms';
import { ConfirmButton } from '../../components/settings/confirm';
import { day, when } from '../../components/settings/format';
import { ActionOutcome, SettingsPage } from '../../components/settings/settings-page';
import { LoadState } from '../../components/status';
import { useSession } from '../../session';

/** MCP connections: the AI clients you authorized (OAuth consents), and revoking them. */
export default function AccountConnections() {
  const session = useSession();
  const connections = useConnections();
  const [notice, setNotice] = useState('');
  const action = useAction();
  const projectName = (id: string) => session.projects.find((p) => p.id === id)?.name ?? id;

  async function revoke(id: string, name: string) {
    const ok = await action.run(id, () => call(api.DELETE('/api/users/me/connections/{id}', { params: { path: { id } } })));
    if (ok) {
      setNotice(`${name} was disconnected; its tokens stopped working.`);
      await connections.reload();
    }
  }

  return (
    <SettingsPage
      title="MCP connections"
      intro={<p>AI assistants and other MCP clients you allowed to act for you through OAuth. Revoking one ends its access at once.</p>}
    >
      <ActionOutcome notice={notice} error={action.error} />
      <LoadState loading={connections.loading} error={connections.error}>
        <DataTable
          caption="Clients connected to your account"
          rows={connections.data?.connections ?? []}
          rowKey={(c) => c.id}
          empty="No MCP client is connected to your account."
          columns={[
            { header: 'Client', cell: (c) => c.client.name },
            { header: 'Projects', cell: (c) => c.projectIds.map(projectName).join(', ') || '—' },
            { header: 'Scope', cell: (c) => <code>{c.scope}</code> },
            { header: 'Connected', cell: (c) => day(c.createdAt) },
            { header: 'Last used', cell: (c) => when(c.lastUsedAt) },
            {
              header: 'Actions',
              hideHeader: true,
              cell: (c) => (
                <ConfirmButton
                  label={`Revoke ${c.client.name}`}
                  text="Revoke"
                  confirmLabel="Disconnect"
                  question="Its tokens stop working."
                  busy={action.running === c.id}
                  onConfirm={() => void revoke(c.id, c.client.name)}
                />
              ),
            },
          ]}
        />
      </LoadState>
    </SettingsPage>
  );
}
