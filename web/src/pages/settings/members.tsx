import { useState } from 'react';
import { useLocation, useParams } from 'wouter';
import { api, call } from '../../api/client';
import { useApi } from '../../api/use-api';
import { Field, FormError, SubmitButton, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { ConfirmButton } from '../../components/settings/confirm';
import { day } from '../../components/settings/format';
import { SettingsTabs } from '../../components/settings/section-nav';
import { useAction } from '../../components/settings/use-action';
import { LoadState } from '../../components/status';
import { useSession } from '../../session';

const ROLES = ['owner', 'admin', 'member', 'viewer'] as const;
const INVITABLE = ['admin', 'member', 'viewer'] as const;
type Role = (typeof ROLES)[number];

/** Members with their roles (change, remove, leave) and invitations by e-mail (invite, resend, cancel). */
export default function Members() {
  const { projectId } = useParams<{ projectId: string }>();
  const session = useSession();
  const [, navigate] = useLocation();
  const access = useProjectAccess(projectId);
  const canManage = access.can('members:manage');
  const isOwner = access.can('members:owner');
  const members = useApi(() => call(api.GET('/api/projects/{id}/members', { params: { path: { id: projectId } } })), [projectId]);
  const invitations = useApi(
    () => call(api.GET('/api/projects/{id}/invitations', { params: { path: { id: projectId }, query: { status: 'pending' } } })),
    [projectId],
  );
  const action = useAction();
  const [chosen, setChosen] = useState<Record<string, Role>>({});
  const [notice, setNotice] = useState('');

  const invite = useSubmit(async (data, form) => {
    const email = String(data.get('email') ?? '').trim();
    const role = String(data.get('role')) as (typeof INVITABLE)[number];
    await call(api.POST('/api/projects/{id}/invitations', { params: { path: { id: projectId } }, body: { email, role } }));
    form.reset();
    setNotice(`Invitation sent to ${email}.`);
    await invitations.reload();
  });

  async function changeRole(userId: string, name: string) {
    const role = chosen[userId];
    if (!role) return;
    const ok = await action.run(`role:${userId}`, () =>
      call(api.PATCH('/api/projects/{id}/members/{memberId}', { params: { path: { id: projectId, memberId: userId } }, body: { role } })),
    );
    if (ok) {
      setNotice(`${name} is now ${role}.`);
      setChosen(({ [userId]: _, ...rest }) => rest);
      await members.reload();
      if (userId === access.userId) await session.reload();
    }
  }

  async function remove(userId: string, name: string) {
    const leaving = userId === access.userId;
    const ok = await action.run(`remove:${userId}`, () =>
      call(api.DELETE('/api/projects/{id}/members/{memberId}', { params: { path: { id: projectId, memberId: userId } } })),
    );
    if (!ok) return;
    if (leaving) {
      await session.reload();
      navigate('/projects');
      return;
    }
    setNotice(`${name} was removed from the project.`);
    await members.reload();
  }

  async function cancel(id: string, email: string) {
    const ok = await action.run(`cancel:${id}`, () =>
      call(api.DELETE('/api/projects/{id}/invitations/{invitationId}', { params: { path: { id: projectId, invitationId: id } } })),
    );
    if (ok) {
      setNotice(`The invitation to ${email} was cancelled; its link no longer works.`);
      await invitations.reload();
    }
  }

  // The API has no resend: a pending invitation blocks a new one, so cancel it and invite again
  // (a new mail with a new link and a fresh 7 days; the old link stops working).
  async function resend(id: string, email: string, role: (typeof INVITABLE)[number]) {
    const ok = await action.run(`resend:${id}`, async () => {
      await call(api.DELETE('/api/projects/{id}/invitations/{invitationId}', { params: { path: { id: projectId, invitationId: id } } }));
      await call(api.POST('/api/projects/{id}/invitations', { params: { path: { id: projectId } }, body: { email, role } }));
    });
    if (ok) setNotice(`A new invitation was sent to ${email}; the earlier link no longer works.`);
    await invitations.reload();
  }

  const pending = invitations.data?.invitations ?? [];

  return (
    <>
      <h1>Members</h1>
      <SettingsTabs projectId={projectId} />
      {!canManage && <p className="muted">{NEEDS['members:manage']} You can see who is here and leave the project.</p>}
      <p role="status" className="st-notice">
        {notice}
      </p>
      {action.error && (
        <p role="alert" className="form-error">
          {action.error.message}
        </p>
      )}
      <section aria-labelledby="members-heading">
        <h2 id="members-heading">Members</h2>
        <LoadState loading={members.loading} error={members.error}>
          <div className="st-scroll">
            <table>
              <caption className="visually-hidden">Members of this project and their roles</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">E-mail</th>
                  <th scope="col">Role</th>
                  <th scope="col">Member since</th>
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {members.data?.members.map((m) => {
                  const self = m.userId === access.userId;
                  // Owner changes (to or from owner) need an owner; everything else members:manage.
                  const canChange = canManage && (isOwner || m.role !== 'owner');
                  const selected = chosen[m.userId] ?? m.role;
                  return (
                    <tr key={m.userId}>
                      <td>
                        {m.name}
                        {self && <span className="muted"> (you)</span>}
                      </td>
                      <td>{m.email}</td>
                      <td>
                        {canChange ? (
                          <span className="st-row">
                            <select
                              aria-label={`Role of ${m.name}`}
                              value={selected}
                              onChange={(e) => setChosen((c) => ({ ...c, [m.userId]: e.target.value as Role }))}
                            >
                              {ROLES.filter((r) => isOwner || r !== 'owner').map((r) => (
                                <option key={r} value={r}>
                                  {r}
                                </option>
                              ))}
                            </select>
                            <button
                              type="button"
                              aria-label={`Save role of ${m.name}`}
                              disabled={selected === m.role || action.running === `role:${m.userId}`}
                              onClick={() => void changeRole(m.userId, m.name)}
                            >
                              {action.running === `role:${m.userId}` ? 'Saving…' : 'Save'}
                            </button>
                          </span>
                        ) : (
                          <span title={canManage ? NEEDS['members:owner'] : undefined}>{m.role}</span>
                        )}
                      </td>
                      <td>{day(m.createdAt)}</td>
                      <td>
                        {(self || (canManage && (isOwner || m.role !== 'owner'))) && (
                          <ConfirmButton
                            label={self ? 'Leave project' : `Remove ${m.name}`}
                            text={self ? 'Leave' : 'Remove'}
                            confirmLabel={self ? 'Leave' : 'Remove'}
                            question={self ? 'Leave this project?' : `Remove ${m.name} from the project?`}
                            busy={action.running === `remove:${m.userId}`}
                            onConfirm={() => void remove(m.userId, m.name)}
                          />
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
          {canManage && !isOwner && <p className="hint">{NEEDS['members:owner']}</p>}
        </LoadState>
      </section>

      <section aria-labelledby="invitations-heading">
        <h2 id="invitations-heading">Pending invitations</h2>
        <LoadState loading={invitations.loading} error={invitations.error}>
          {pending.length ? (
            <div className="st-scroll">
              <table>
                <caption className="visually-hidden">Invitations not accepted yet</caption>
                <thead>
                  <tr>
                    <th scope="col">E-mail</th>
                    <th scope="col">Role</th>
                    <th scope="col">Sent</th>
                    <th scope="col">Expires</th>
                    <th scope="col">
                      <span className="visually-hidden">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {pending.map((inv) => (
                    <tr key={inv.id}>
                      <td>{inv.email}</td>
                      <td>{inv.role}</td>
                      <td>{day(inv.createdAt)}</td>
                      <td>{day(inv.expiresAt)}</td>
                      <td>
                        {canManage && (
                          <span className="st-row">
                            <button
                              type="button"
                              aria-label={`Resend invitation to ${inv.email}`}
                              disabled={!!action.running}
                              onClick={() => void resend(inv.id, inv.email, inv.role)}
                            >
                              {action.running === `resend:${inv.id}` ? 'Sending…' : 'Resend'}
                            </button>
                            <ConfirmButton
                              label={`Cancel invitation to ${inv.email}`}
                              text="Cancel"
                              confirmLabel="Cancel invitation"
                              question="Its link will stop working."
                              busy={action.running === `cancel:${inv.id}`}
                              onConfirm={() => void cancel(inv.id, inv.email)}
                            />
                          </span>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          ) : (
            <p>No pending invitations.</p>
          )}
        </LoadState>
      </section>

      {canManage && (
        <section aria-labelledby="invite-heading">
          <h2 id="invite-heading">Invite someone</h2>
          <form onSubmit={invite.onSubmit} noValidate className="inline-form">
            <Field label="E-mail address" name="email" type="email" required maxLength={254} autoComplete="off" error={invite.error} />
            <div className="field">
              <label htmlFor="invite-role">Role</label>
              <select id="invite-role" name="role" defaultValue="member">
                {INVITABLE.map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
              <p className="hint">Owners are not invited: invite as admin, then make them owner once they joined.</p>
            </div>
            <FormError error={invite.error} fields={['email', 'role']} />
            <SubmitButton busy={invite.busy}>Send invitation</SubmitButton>
          </form>
        </section>
      )}
    </>
  );
}
