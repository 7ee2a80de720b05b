import { useEffect, useState } from 'react';
import { Link, useSearch } from 'wouter';
import { api, asApiError, call } from '../api/client';
import { useSession } from '../session';

/** Tokens already sent from this page: a token is single-use, and StrictMode runs effects twice. */
const sent = new Map<string, Promise<void>>();

/** The link of the verification mail: /verify-email?token=… posts the token once. */
export default function VerifyEmail() {
  const token = new URLSearchParams(useSearch()).get('token') ?? '';
  const session = useSession();
  const [outcome, setOutcome] = useState<{ ok: true } | { ok: false; message: string } | undefined>();

  useEffect(() => {
    if (!token) return;
    if (!sent.has(token)) sent.set(token, call(api.POST('/api/auth/verify-email', { body: { token } })).then(() => undefined));
    let current = true;
    sent.get(token)!.then(
      () => current && setOutcome({ ok: true }),
      (error: unknown) => current && setOutcome({ ok: false, message: asApiError(error).message }),
    );
    return () => {
      current = false;
    };
  }, [token]);

  // A signed-in user's emailVerified changes: the session shows it.
  const { reload, status } = session;
  useEffect(() => {
    if (outcome?.ok && status === 'signed-in') void reload();
  }, [outcome, status, reload]);

  return (
    <section className="narrow">
      <h1>Verify your e-mail address</h1>
      {!token ? (
        <p role="alert" className="form-error">
          This link has no token. Open the link from the verification mail again.
        </p>
      ) : !outcome ? (
        <p role="status">Verifying…</p>
      ) : outcome.ok ? (
        <p role="status">
          Your e-mail address is verified. <Link href="/">Continue to the console</Link>
        </p>
      ) : (
        <p role="alert" className="form-error">
          {outcome.message}
        </p>
      )}
    </section>
  );
}
