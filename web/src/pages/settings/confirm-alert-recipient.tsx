import { useState } from 'react';
import { useSearch } from 'wouter';
import { api, ApiError, call } from '../../api/client';

/**
 * The link mailed to each recipient of an e-mail alert channel: /alert-channels/confirm?token=….
 * Confirming is consent to receive alerts, so it takes a press of the button (a mail scanner that
 * opens links does not confirm); the recipient needs no account.
 */
export default function ConfirmAlertRecipient() {
  const token = new URLSearchParams(useSearch()).get('token') ?? '';
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ ok: true; email: string } | { ok: false; message: string } | undefined>();

  async function confirm() {
    setBusy(true);
    try {
      const confirmed = await call(api.POST('/api/alert-channels/recipients/confirm', { body: { token } }));
      setOutcome({ ok: true, email: confirmed.email });
    } catch (error) {
      setOutcome({ ok: false, message: error instanceof ApiError ? error.message : String(error) });
    } finally {
      setBusy(false);
    }
  }

  return (
    <section className="narrow">
      <h1>Confirm alert e-mails</h1>
      {!token ? (
        <p role="alert" className="form-error">
          This link has no token. Open the link from the confirmation mail again.
        </p>
      ) : outcome?.ok ? (
        <p role="status">{outcome.email} will receive this alert channel's e-mails. You can close this page.</p>
      ) : (
        <>
          <p>Someone added your address to an alert channel of the feature flag service. Alerts are e-mailed to you only once you confirm.</p>
          <div role="alert" className={outcome ? 'form-error' : undefined}>
            {outcome?.message}
          </div>
          <button type="button" className="primary" disabled={busy} onClick={() => void confirm()}>
            {busy ? 'Confirming…' : 'Confirm alert e-mails'}
          </button>
          <p className="hint">If you did not expect this, ignore the mail: nothing is sent until you confirm.</p>
        </>
      )}
    </section>
  );
}
