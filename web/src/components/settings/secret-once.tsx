/**
 * A secret the API returns once (a token's value, a webhook's signing key, a trigger URL): shown
 * in a modal dialog with a Copy button and the warning that it will not be shown again. It lives
 * only in the opening page's state: closing the dialog or reloading the page drops it.
 */
import { useEffect, useId, useRef, useState } from 'react';

export interface Secret {
  label: string;
  value: string;
}

export interface SecretsShown {
  title: string;
  secrets: Secret[];
  /** What the secret is for (how to send it), under the warning. */
  note?: string;
}

export function SecretDialog({ shown, onClose }: { shown?: SecretsShown; onClose(): void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const [announcement, setAnnouncement] = useState('');

  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (shown && !dialog.open) {
      setAnnouncement('');
      dialog.showModal();
    } else if (!shown && dialog.open) dialog.close();
  }, [shown]);

  async function copy(secret: Secret) {
    try {
      await navigator.clipboard.writeText(secret.value);
      setAnnouncement(`Copied ${secret.label.toLowerCase()} to the clipboard`);
    } catch {
      // No clipboard access (permission refused, or a page that is not a secure context).
      setAnnouncement('Could not copy: select the text and copy it yourself');
    }
  }

  return (
    // Escape closes a modal <dialog> natively: its close event clears the secret from the page.
    <dialog ref={ref} className="st-secret-dialog" aria-labelledby={titleId} onClose={onClose}>
      {shown && (
        <>
          <h2 id={titleId}>{shown.title}</h2>
          <p className="st-secret-warning">
            <strong>Copy it now: it will not be shown again.</strong> Only a hash is kept; if it is lost, create a new one.
          </p>
          {shown.note && <p className="hint">{shown.note}</p>}
          {shown.secrets.map((secret, i) => (
            <div key={secret.label} className="st-secret">
              <label className="st-secret-label" htmlFor={`${titleId}-${i}`}>
                {secret.label}
              </label>
              {/* Read-only text: labelled, selectable and wrapped, for copying by hand too. */}
              <textarea
                id={`${titleId}-${i}`}
                className="st-secret-value"
                readOnly
                rows={secret.value.length > 80 ? 4 : 2}
                value={secret.value}
                spellCheck={false}
                onFocus={(e) => e.currentTarget.select()}
              />
              <button type="button" onClick={() => void copy(secret)}>
                {shown.secrets.length > 1 ? `Copy ${secret.label.toLowerCase()}` : 'Copy'}
              </button>
            </div>
          ))}
          <p role="status" aria-live="polite" className="st-secret-status">
            {announcement}
          </p>
          <button type="button" className="primary" onClick={() => ref.current?.close()}>
            I have copied it
          </button>
        </>
      )}
    </dialog>
  );
}
