/**
 * What of an evaluation context the recent-contexts warehouse keeps (and so what a simulation
 * replays): the attributes without targetingKey, without any deny-listed name at any depth
 * (CONTEXT_ATTRIBUTE_DENYLIST), and only as many attributes as fit in `maxBytes` of JSON
 * (CONTEXT_ATTRIBUTE_MAX_BYTES), in the order the context has them.
 */
export class ContextAttributeFilter {
  private readonly denied: ReadonlySet<string>;

  constructor(
    denylist: readonly string[],
    private readonly maxBytes: number,
  ) {
    this.denied = new Set(denylist.map(normalizeName));
  }

  /** The stored attributes as JSON object text. */
  toJson(context: Record<string, unknown>): string {
    let text = '{';
    let bytes = 2;
    for (const name of Object.keys(context)) {
      if (name === 'targetingKey' || this.isDenied(name)) continue;
      const value = JSON.stringify(context[name], this.dropDenied);
      if (value === undefined) continue;
      const field = `${JSON.stringify(name)}:${value}`;
      const size = Buffer.byteLength(field) + (text.length > 1 ? 1 : 0);
      // One large attribute is left out, not the whole context: the others still target.
      if (bytes + size > this.maxBytes) continue;
      text += text.length > 1 ? `,${field}` : field;
      bytes += size;
    }
    return `${text}}`;
  }

  /** The stored attributes as an object (what a replay evaluates, whichever source it came from). */
  toAttributes(context: Record<string, unknown>): Record<string, unknown> {
    return JSON.parse(this.toJson(context)) as Record<string, unknown>;
  }

  private isDenied(name: string): boolean {
    return this.denied.has(normalizeName(name));
  }

  /** JSON.stringify replacer: nested objects lose deny-listed names too (`user.email`). */
  private readonly dropDenied = (key: string, value: unknown): unknown => (key !== '' && this.isDenied(key) ? undefined : value);
}

/** `ip_address`, `IP-Address` and `ipAddress` are one name. */
function normalizeName(name: string): string {
  return name.toLowerCase().replace(/[_.-]/g, '');
}
