import { useState } from 'react';
import { useLocation, useParams } from 'wouter';
import { api, call } from '../../api/client';
import { useMembers, usePendingInvitations } from '../../api/resources';
import { DataTable } from '../../components/data-table';
import { Field, FormError, SelectField, SubmitButton, useAction, useSubmit } from '../../components/forms';
import { NEEDS, useProjectAccess } from '../../components/settings/access';
import { ConfirmButton } from '../../components/settings/confirm';
import { day } from '../../components/settings/format';
import { ActionOutcome, SettingsPage } from '../../components/settings/settings-page';
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
  const members = useMembers(projectId);
  const invitations = usePendingInvitations(projectId);
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

  // Owner changes (to or from owner) need an owner; everything else members:manage.
  const canChange = (role: Role) => canManage && (isOwner || role !== 'owner');

  return (
    <SettingsPage
      title="Members"
      projectId={projectId}
      intro={!canManage && <p className="muted">{NEEDS['members:manage']} You can see who is here and leave the project.</p>}
    >
      <ActionOutcome notice={notice} error={action.error} />
      <section aria-labelledby="members-heading">
        <h2 id="members-heading">Members</h2>
        <LoadState loading={members.loading} error={members.error}>
          <DataTable
            caption="Members of this project and their roles"
            rows={members.data?.members ?? []}
            rowKey={(m) => m.userId}
            empty="No members."
            columns={[
              {
                header: 'Name',
                cell: (m) => (
                  <>
                    {m.name}
                    {m.userId === access.userId && <span className="muted"> (you)</span>}
                  </>
                ),
              },
              { header: 'E-mail', cell: (m) => m.email },
              {
                header: 'Role',
                cell: (m) => {
                  const selected = chosen[m.userId] ?? m.role;
                  if (!canChange(m.role)) return <span title={canManage ? NEEDS['members:owner'] : undefined}>{m.role}</span>;
                  return (
                    <span className="st-row">
                      <select aria-label={`Role of ${m.name}`} value={selected} onChange={(e) => setChosen((c) => ({ ...c, [m.userId]: e.target.value as Role }))}>
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
                  );
                },
              },
              { header: 'Member since', cell: (m) => day(m.createdAt) },
              {
                header: 'Actions',
                hideHeader: true,
                cell: (m) => {
                  const self = m.userId === access.userId;
                  return (
                    (self || canChange(m.role)) && (
                      <ConfirmButton
                        label={self ? 'Leave project' : `Remove ${m.name}`}
                        text={self ? 'Leave' : 'Remove'}
                        confirmLabel={self ? 'Leave' : 'Remove'}
                        question={self ? 'Leave this project?' : `Remove ${m.name} from the project?`}
                        busy={action.running === `remove:${m.userId}`}
                        onConfirm={() => void remove(m.userId, m.name)}
                      />
                    )
                  );
                },
              },
            ]}
          />
          {canManage && !isOwner && <p className="hint">{NEEDS['members:owner']}</p>}
        </LoadState>
      </section>

      <section aria-labelledby="invitations-heading">
        <h2 id="invitations-heading">Pending invitations</h2>
        <LoadState loading={invitations.loading} error={invitations.error}>
          <DataTable
            caption="Invitations not accepted yet"
            rows={invitations.data?.invitations ?? []}
            rowKey={(inv) => inv.id}
            empty="No pending invitations."
            columns={[
              { header: 'E-mail', cell: (inv) => inv.email },
              { header: 'Role', cell: (inv) => inv.role },
              { header: 'Sent', cell: (inv) => day(inv.createdAt) },
              { header: 'Expires', cell: (inv) => day(inv.expiresAt) },
              {
                header: 'Actions',
                hideHeader: true,
                cell: (inv) =>
                  canManage && (
                    <span className="st-row">
                      <button type="button" aria-label={`Resend invitation to ${inv.email}`} disabled={!!action.running} onClick={() => void resend(inv.id, inv.email, inv.role)}>
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
                  ),
              },
            ]}
          />
        </LoadState>
      </section>

      {canManage && (
        <section aria-labelledby="invite-heading">
          <h2 id="invite-heading">Invite someone</h2>
          <form onSubmit={invite.onSubmit} noValidate className="inline-form">
            <Field label="E-mail address" name="email" type="email" required maxLength={254} autoComplete="off" error={invite.error} />
            <SelectField
              label="Role"
              name="role"
              defaultValue="member"
              error={invite.error}
              hint="Owners are not invited: invite as admin, then make them owner once they joined."
            >
              {INVITABLE.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </SelectField>
            <FormError error={invite.error} fields={['email', 'role']} />
            <SubmitButton busy={invite.busy}>Send invitation</SubmitButton>
          </form>
        </section>
      )}
    </SettingsPage>
  );
}
