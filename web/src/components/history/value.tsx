/** A JSON value as text: strings quoted (so "" and "false" read apart from empty and false), the rest as compact JSON. */
export function formatValue(value: unknown): string {
  if (value === undefined) return '—';
  const text = JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}

export function JsonValue({ value }: { value: unknown }) {
  if (value === undefined) return <span className="muted" aria-label="none">—</span>;
  return <code className="json-value">{formatValue(value)}</code>;
}

/** A timestamp in the reader's locale, machine-readable in dateTime. */
export function When({ at }: { at: string }) {
  return <time dateTime={at}>{new Date(at).toLocaleString()}</time>;
}
