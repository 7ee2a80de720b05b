import { useState } from 'react';

/** Copies `value`; says so (or why it could not) in a polite live region beside the button. */
export function CopyButton({ value, label }: { value: string; label: string }) {
  const [announcement, setAnnouncement] = useState('');
  async function copy() {
    try {
      await navigator.clipboard.writeText(value);
      setAnnouncement('Copied');
    } catch {
      // No clipboard access (permission refused, or a page that is not a secure context).
      setAnnouncement('Could not copy: select the text and copy it yourself');
    }
  }
  return (
    <>
      <button type="button" aria-label={label} onClick={() => void copy()}>
        Copy
      </button>{' '}
      <span role="status" aria-live="polite" className="muted">
        {announcement}
      </span>
    </>
  );
}
