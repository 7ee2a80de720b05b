import type { Registry } from 'prom-client';

/**
 * Counters and histograms for hot paths (docs/operations.md#metrics). prom-client's own
 * label children build a label string and validate the labels on every increment; these keep
 * each series as plain numbers bound once (`cell`), and are rendered by the registry at scrape
 * time like any prom-client metric.
 */

type Labels = Record<string, string>;

export interface CounterCell {
  value: number;
}

interface Rendered {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: { labels: Labels; value: number; metricName?: string }[];
}

abstract class HotMetric {
  readonly aggregator = 'sum';

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
  ) {
    // The registry renders any object with a name and get() (prom-client's own metrics are such objects).
    registry.registerMetric(this as never);
  }

  abstract get(): Rendered;

  /** Registry.resetMetrics: series keep counting (a scrape never resets them). */
  reset(): void {}
}

export class HotCounter extends HotMetric {
  readonly type = 'counter';
  private readonly cells: { labels: Labels; cell: CounterCell }[] = [];

  /** A series, exposed at zero from now on; its holder adds to `value`. */
  cell(labels: Labels): CounterCell {
    const cell = { value: 0 };
    this.cells.push({ labels, cell });
    return cell;
  }

  get(): Rendered {
    return { name: this.name, help: this.help, type: 'counter', aggregator: 'sum', values: this.cells.map(({ labels, cell }) => ({ labels, value: cell.value })) };
  }
}

export class HistogramCell {
  /** Observations per bucket (not cumulative), the last one past every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const { bounds } = this;
    let i = 0;
    while (i < bounds.length && value > bounds[i]) i++;
    this.counts[i]++;
    this.sum += value;
    this.count++;
  }
}

export class HotHistogram extends HotMetric {
  readonly type = 'histogram';
  private readonly cells: { labels: Labels; cell: HistogramCell }[] = [];

  constructor(
    registry: Registry,
    name: string,
    help: string,
    private readonly bounds: readonly number[],
  ) {
    super(registry, name, help);
  }

  /** A series, exposed at zero from now on. */
  cell(labels: Labels): HistogramCell {
    const cell = new HistogramCell(this.bounds);
    this.cells.push({ labels, cell });
    return cell;
  }

  get(): Rendered {
    const values: Rendered['values'] = [];
    for (const { labels, cell } of this.cells) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += cell.counts[i];
        values.push({ labels: { ...labels, le: i < this.bounds.length ? String(this.bounds[i]) : '+Inf' }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels, value: cell.sum, metricName: `${this.name}_sum` }, { labels, value: cell.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values };
  }
}
