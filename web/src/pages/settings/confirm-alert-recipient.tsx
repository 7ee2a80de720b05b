import { useState } from 'react';
import { useSearch } from 'wouter';
import { api, call } from '../../api/client';
import { useAction } from '../../components/forms';

/**
 * The link mailed to each recipient of an e-mail alert channel: /alert-channels/confirm?token=….
 * Confirming is consent to receive alerts, so it takes a press of the button (a mail scanner that
 * opens links does not confirm); the recipient needs no account.
 */
export default function ConfirmAlertRecipient() {
  const token = new URLSearchParams(useSearch()).get('token') ?? '';
  const action = useAction();
  const [confirmedEmail, setConfirmedEmail] = useState<string>();

  async function confirm() {
    await action.run('confirm', async () => {
      setConfirmedEmail((await call(api.POST('/api/alert-channels/recipients/confirm', { body: { token } }))).email);
    });
  }

  return (
    <section className="narrow">
      <h1>Confirm alert e-mails</h1>
      {!token ? (
        <p role="alert" className="form-error">
          This link has no token. Open the link from the confirmation mail again.
        </p>
      ) : confirmedEmail ? (
        <p role="status">{confirmedEmail} will receive this alert channel's e-mails. You can close this page.</p>
      ) : (
        <>
          <p>Someone added your address to an alert channel of the feature flag service. Alerts are e-mailed to you only once you confirm.</p>
          <div role="alert" className={action.error ? 'form-error' : undefined}>
            {action.error?.message}
          </div>
          <button type="button" className="primary" disabled={action.running !== undefined} onClick={() => void confirm()}>
            {action.running ? 'Confirming…' : 'Confirm alert e-mails'}
          </button>
          <p className="hint">If you did not expect this, ignore the mail: nothing is sent until you confirm.</p>
        </>
      )}
    </section>
  );
}
