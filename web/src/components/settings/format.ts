/** A timestamp as the reader's locale writes it; "never" for none. */
export function when(iso: string | null | undefined, none = 'never'): string {
  return iso ? new Date(iso).toLocaleString() : none;
}

/** A date only (expiries, creation). */
export function day(iso: string | null | undefined, none = 'never'): string {
  return iso ? new Date(iso).toLocaleDateString() : none;
}
