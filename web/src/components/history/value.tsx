const SHOWN_CHARS = 200;

/** A JSON value as text: strings quoted (so "" and "false" read apart from empty and false), the rest as compact JSON. */
export function formatValue(value: unknown): string {
  if (value === undefined) return '—';
  const text = JSON.stringify(value);
  return text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS - 1)}…` : text;
}

/** A value cut short keeps its whole text in the tooltip. */
export function JsonValue({ value }: { value: unknown }) {
  if (value === undefined) return <span className="muted" aria-label="none">—</span>;
  const whole = JSON.stringify(value);
  return (
    <code className="json-value" title={whole.length > SHOWN_CHARS ? whole : undefined}>
      {formatValue(value)}
    </code>
  );
}

/** A timestamp in the reader's locale, machine-readable in dateTime. */
export function When({ at }: { at: string }) {
  return <time dateTime={at}>{new Date(at).toLocaleString()}</time>;
}
