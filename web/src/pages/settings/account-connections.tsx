import { useState } from 'react';
import { api, call } from '../../api/client';
import { useApi } from '../../api/use-api';
import { ConfirmButton } from '../../components/settings/confirm';
import { day, when } from '../../components/settings/format';
import { AccountTabs } from '../../components/settings/section-nav';
import { useAction } from '../../components/settings/use-action';
import { LoadState } from '../../components/status';
import { useSession } from '../../session';

/** GET /api/users/me/connections documents no body; this is OAuthService.listConnections' shape. */
interface Connection {
  id: string;
  client: { id: string; name: string };
  projectIds: string[];
  scope: string;
  createdAt: string;
  lastUsedAt: string | null;
}

/** MCP connections: the AI clients you authorized (OAuth consents), and revoking them. */
export default function AccountConnections() {
  const session = useSession();
  const connections = useApi(async () => (await call(api.GET('/api/users/me/connections'))) as unknown as { connections: Connection[] }, []);
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
    <>
      <h1>MCP connections</h1>
      <AccountTabs />
      <p>AI assistants and other MCP clients you allowed to act for you through OAuth. Revoking one ends its access at once.</p>
      <p role="status" className="st-notice">
        {notice}
      </p>
      {action.error && (
        <p role="alert" className="form-error">
          {action.error.message}
        </p>
      )}
      <LoadState loading={connections.loading} error={connections.error}>
        {connections.data?.connections.length ? (
          <div className="st-scroll">
            <table>
              <caption className="visually-hidden">Clients connected to your account</caption>
              <thead>
                <tr>
                  <th scope="col">Client</th>
                  <th scope="col">Projects</th>
                  <th scope="col">Scope</th>
                  <th scope="col">Connected</th>
                  <th scope="col">Last used</th>
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {connections.data.connections.map((c) => (
                  <tr key={c.id}>
                    <td>{c.client.name}</td>
                    <td>{c.projectIds.map(projectName).join(', ') || '—'}</td>
                    <td>
                      <code>{c.scope}</code>
                    </td>
                    <td>{day(c.createdAt)}</td>
                    <td>{when(c.lastUsedAt)}</td>
                    <td>
                      <ConfirmButton
                        label={`Revoke ${c.client.name}`}
                        text="Revoke"
                        confirmLabel="Disconnect"
                        question="Its tokens stop working."
                        busy={action.running === c.id}
                        onConfirm={() => void revoke(c.id, c.client.name)}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : (
          <p>No MCP client is connected to your account.</p>
        )}
      </LoadState>
    </>
  );
}
