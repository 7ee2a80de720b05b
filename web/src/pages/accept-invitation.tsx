import { useState } from 'react';
import { Link, useSearch } from 'wouter';
import { api, call } from '../api/client';
import { FormError, SubmitButton, useSubmit } from '../components/forms';
import { useSession } from '../session';

/**
 * The link of an invitation mail: /invitations/accept?token=…. Accepting needs a signed-in user
 * whose verified e-mail is the invited address, so a signed-out visitor is sent to sign in (or
 * up) and comes back here.
 */
export default function AcceptInvitation() {
  const search = useSearch();
  const token = new URLSearchParams(search).get('token') ?? '';
  const session = useSession();
  const [joined, setJoined] = useState<{ id: string; name: string } | undefined>();
  const { busy, error, onSubmit } = useSubmit(async () => {
    const { project } = await call(api.POST('/api/invitations/{token}/accept', { params: { path: { token } } }));
    setJoined(project);
    await session.reload();
  });
  const back = encodeURIComponent(`/invitations/accept?${search}`);

  if (!token) {
    return (
      <section className="narrow">
        <h1>Accept an invitation</h1>
        <p role="alert" className="form-error">
          This link has no token. Open the link from the invitation mail again.
        </p>
      </section>
    );
  }
  return (
    <section className="narrow">
      <h1>Accept an invitation</h1>
      {joined ? (
        <p role="status">
          You joined {joined.name}. <Link href={`/projects/${encodeURIComponent(joined.id)}`}>Open the project</Link>
        </p>
      ) : session.status !== 'signed-in' ? (
        <p>
          Sign in with the invited e-mail address to accept: <Link href={`/signin?next=${back}`}>Sign in</Link> or{' '}
          <Link href={`/signup?next=${back}`}>create an account</Link>.
        </p>
      ) : (
        <form onSubmit={onSubmit}>
          <p>
            You are signed in as <strong>{session.user?.email}</strong>. The invitation must be for this address, and the address must be verified.
          </p>
          <FormError error={error} />
          <SubmitButton busy={busy}>Accept invitation</SubmitButton>
        </form>
      )}
    </section>
  );
}
