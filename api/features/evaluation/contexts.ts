import type { EvaluationResult } from './engine/index';

/** One evaluation request as the context browser keeps it. */
export interface ContextEntry {
  at: number;
  serviceId: string;
  environment: string;
  targetingKey: string;
  /** The caller's context (never copied: the request path hands over its parsed object). */
  context: Record<string, unknown>;
  /**
   * The request's results, the recorder's own array (shared, not copied: an entry outlives a
   * young-generation collection, and what it holds is then copied); the first
   * MAX_VALUES_PER_ENTRY are read.
   */
  results: readonly Pick<EvaluationResult, 'flagKey' | 'value'>[];
  /** The request body's size in bytes; the ring adds its results' share for its byte budget (`sizeOf`). */
  bytes: number;
}

export interface ContextSummary {
  targetingKey: string;
  attributes: Record<string, unknown>;
  evaluationCount: number;
  flags: Record<string, unknown>;
  environments: string[];
  firstSeen: string;
  lastSeen: string;
}

const MAX_VALUES_PER_ENTRY = 64;
/** What the byte budget counts per flag value an entry shows. */
const BYTES_PER_VALUE = 64;

/** An entry's approximate size for the byte budget: its body and the values it shows. */
const sizeOf = (e: ContextEntry) => e.bytes + BYTES_PER_VALUE * Math.min(e.results.length, MAX_VALUES_PER_ENTRY);

/**
 * The evaluation-context ring (docs/data-plane.md#context-ring-get-apicontexts-control-plane): the
 * last `capacity` (about 1,000) evaluation requests of this instance that carried a targetingKey
 * (at most `capacity` of them a second, see `takes`),
 * bounded also by `maxBytes` so large contexts cannot grow it past a few megabytes. Pushing is O(1)
 * and allocation-light; grouping by targetingKey happens when someone reads it.
 */
export class ContextRing {
  private readonly entries: (ContextEntry | undefined)[];
  private next = 0;
  private size = 0;
  private bytes = 0;
  /** The second (of epoch milliseconds) the ring is taking entries in, and how many it took. */
  private second = 0;
  private takenThisSecond = 0;

  constructor(
    private readonly capacity: number,
    private readonly maxBytes: number,
    /** Told every entry the ring takes (the recent-contexts warehouse); must stay O(1) and never throw. */
    private readonly onPush?: (entry: ContextEntry) => void,
  ) {
    this.entries = new Array(capacity);
  }

  /**
   * Whether the ring takes a request made at `at` (epoch ms): the first `capacity` of each
   * second. Past that it samples: under heavy load the ring still spans about a second instead
   * of a few milliseconds, and a request it does not take costs no entry (entries outlive a
   * young-generation collection, and are then copied) nor an offer to the warehouse.
   */
  takes(at: number): boolean {
    const second = Math.floor(at / 1000);
    if (second !== this.second) {
      this.second = second;
      this.takenThisSecond = 0;
    }
    return this.takenThisSecond++ < this.capacity;
  }

  /** Call after `takes` said yes. */
  push(entry: ContextEntry): void {
    this.onPush?.(entry);
    const old = this.entries[this.next];
    if (old !== undefined) {
      this.bytes -= sizeOf(old);
      this.size--;
    }
    this.entries[this.next] = entry;
    this.bytes += sizeOf(entry);
    this.size++;
    this.next = (this.next + 1) % this.capacity;
    // Over the byte budget: drop the oldest entries (never the one just added).
    let oldest = (this.next + this.capacity - this.size) % this.capacity;
    while (this.bytes > this.maxBytes && this.size > 1) {
      const e = this.entries[oldest];
      if (e !== undefined) {
        this.bytes -= sizeOf(e);
        this.size--;
        this.entries[oldest] = undefined;
      }
      oldest = (oldest + 1) % this.capacity;
    }
  }

  /** Entries of a service (and environment), oldest first. */
  private *select(serviceId: string, environment?: string): Iterable<ContextEntry> {
    for (let i = 0; i < this.capacity; i++) {
      const e = this.entries[(this.next + i) % this.capacity];
      if (e !== undefined && e.serviceId === serviceId && (environment === undefined || e.environment === environment)) yield e;
    }
  }

  /** Contexts grouped by targetingKey, most recently seen first. */
  summaries(serviceId: string, environment?: string): ContextSummary[] {
    const groups = new Map<string, ContextSummary>();
    for (const e of this.select(serviceId, environment)) {
      let g = groups.get(e.targetingKey);
      if (g === undefined) {
        g = {
          targetingKey: e.targetingKey,
          attributes: {},
          evaluationCount: 0,
          flags: {},
          environments: [],
          firstSeen: new Date(e.at).toISOString(),
          lastSeen: new Date(e.at).toISOString(),
        };
        groups.set(e.targetingKey, g);
      }
      // Later entries win: attributes and values are the most recent ones seen.
      g.attributes = attributesOf(e.context);
      g.evaluationCount += e.results.length;
      const shown = Math.min(e.results.length, MAX_VALUES_PER_ENTRY);
      for (let i = 0; i < shown; i++) g.flags[e.results[i].flagKey] = e.results[i].value;
      if (!g.environments.includes(e.environment)) g.environments.push(e.environment);
      g.lastSeen = new Date(e.at).toISOString();
    }
    return [...groups.values()].sort((a, b) => (a.lastSeen < b.lastSeen ? 1 : a.lastSeen > b.lastSeen ? -1 : 0));
  }

  /** One targetingKey's latest values per flag, or undefined when the ring has none. */
  context(serviceId: string, targetingKey: string, environment?: string): ContextSummary | undefined {
    return this.summaries(serviceId, environment).find((s) => s.targetingKey === targetingKey);
  }

  get length(): number {
    return this.size;
  }
}

function attributesOf(context: Record<string, unknown>): Record<string, unknown> {
  const { targetingKey: _ignored, ...attributes } = context;
  return attributes;
}
