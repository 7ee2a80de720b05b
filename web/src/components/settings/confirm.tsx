import { useEffect, useRef, useState, type ReactNode } from 'react';

/**
 * A destructive button that asks once more in place (no window.confirm): the first press shows
 * "Confirm" and "Cancel" where the button was, so keyboard focus stays in the row.
 */
export function ConfirmButton({
  label,
  text,
  confirmLabel,
  question,
  busy,
  disabled,
  onConfirm,
}: {
  /** The first button's accessible name, e.g. "Revoke CI token". */
  label: string;
  /** Its visible text when shorter than the name ("Revoke"); the name says which row. */
  text?: string;
  confirmLabel: string;
  question: ReactNode;
  busy?: boolean;
  disabled?: boolean;
  onConfirm(): void;
}) {
  const [asking, setAsking] = useState(false);
  const button = useRef<HTMLButtonElement>(null);
  const asked = useRef(false);
  // Back from the question (cancelled, or confirmed and still in the page): focus returns to the button.
  useEffect(() => {
    if (asking) asked.current = true;
    else if (asked.current) button.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button ref={button} type="button" className="st-danger" aria-label={text ? label : undefined} disabled={disabled || busy} onClick={() => setAsking(true)}>
        {busy ? 'Working…' : (text ?? label)}
      </button>
    );
  }
  return (
    <span className="st-confirm" role="group" aria-label={label}>
      <span>{question}</span>{' '}
      <button
        type="button"
        className="st-danger"
        autoFocus
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirmLabel}
      </button>{' '}
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}
