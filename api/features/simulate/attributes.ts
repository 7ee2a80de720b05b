/**
 * What of an evaluation context the recent-contexts warehouse keeps (and so what a simulation
 * replays): the attributes without targetingKey, without any deny-listed name at any depth
 * (CONTEXT_ATTRIBUTE_DENYLIST), and only as many attributes as fit in `maxBytes` of JSON
 * (CONTEXT_ATTRIBUTE_MAX_BYTES), in the order the context has them.
 */
export class ContextAttributeFilter {
  private readonly denied: ReadonlySet<string>;
  /** Attribute name -> denied: names repeat from context to context, normalizing them does not need to. */
  private readonly verdicts = new Map<string, boolean>();

  constructor(
    denylist: readonly string[],
    private readonly maxBytes: number,
  ) {
    this.denied = new Set(denylist.map(normalizeName));
  }

  /** The stored attributes as JSON object text. */
  toJson(context: Record<string, unknown>): string {
    const whole = JSON.stringify(context, this.replacerFor(context));
    // A UTF-8 byte is at most three UTF-16 units' worth here, so short text needs no byte count.
    if (whole.length * 3 <= this.maxBytes || Buffer.byteLength(whole) <= this.maxBytes) return whole;
    return this.fitted(context);
  }

  /** The stored attributes as an object (what a replay evaluates, whichever source it came from). */
  toAttributes(context: Record<string, unknown>): Record<string, unknown> {
    return JSON.parse(this.toJson(context)) as Record<string, unknown>;
  }

  /** Over the cap: attributes in order, each one that does not fit left out (the others still target). */
  private fitted(context: Record<string, unknown>): string {
    const replacer = this.replacerFor(undefined);
    let text = '{';
    let bytes = 2;
    for (const name of Object.keys(context)) {
      if (name === 'targetingKey' || this.isDenied(name)) continue;
      const value = JSON.stringify(context[name], replacer);
      if (value === undefined) continue;
      const field = `${JSON.stringify(name)}:${value}`;
      const size = Buffer.byteLength(field) + (text.length > 1 ? 1 : 0);
      if (bytes + size > this.maxBytes) continue;
      text += text.length > 1 ? `,${field}` : field;
      bytes += size;
    }
    return `${text}}`;
  }

  /** A JSON.stringify replacer dropping deny-listed names at any depth (`user.email`), and targetingKey from `root`. */
  private replacerFor(root: object | undefined) {
    const isDenied = (name: string) => this.isDenied(name);
    // A function, not an arrow: JSON.stringify passes the object holding `key` as `this`.
    return function (this: unknown, key: string, value: unknown): unknown {
      if (key === '') return value;
      if (this === root && key === 'targetingKey') return undefined;
      return isDenied(key) ? undefined : value;
    };
  }

  private isDenied(name: string): boolean {
    let verdict = this.verdicts.get(name);
    if (verdict === undefined) {
      verdict = this.denied.has(normalizeName(name));
      // Bounded: contexts whose attribute names never repeat must not grow it.
      if (this.verdicts.size >= MAX_REMEMBERED_NAMES) this.verdicts.clear();
      this.verdicts.set(name, verdict);
    }
    return verdict;
  }
}

const MAX_REMEMBERED_NAMES = 10_000;

/** `ip_address`, `IP-Address` and `ipAddress` are one name. */
function normalizeName(name: string): string {
  return name.toLowerCase().replace(/[_.-]/g, '');
}
