import type { AnalyticsRows, AnalyticsSink, AnalyticsTable } from '../../analytics/rows';
import type { ContextEntry } from '../../api/features/evaluation/contexts';
import { ContextAttributeFilter } from '../../api/features/simulate/attributes';
import { RecentContextRecorder } from '../../api/features/simulate/recorder';

/** The attribute filter and the recorder's deduplication, without a server (the HTTP side is in simulate.test.ts). */

describe('ContextAttributeFilter', () => {
  const filter = new ContextAttributeFilter(['email', 'ipAddress'], 120);

  it('drops targetingKey and deny-listed names at any depth, ignoring case, _, - and .', () => {
    const context = {
      targetingKey: 'u-1',
      plan: 'pro',
      EMAIL: 'a@b.c',
      ip_address: '10.0.0.1',
      'IP-Address': '10.0.0.2',
      account: { tier: 'gold', email: 'x@y.z', targetingKey: 'nested keys stay' },
      devices: [{ ipAddress: '10.0.0.3', os: 'ios' }],
    };
    expect(JSON.parse(filter.toJson(context))).toEqual({
      plan: 'pro',
      account: { tier: 'gold', targetingKey: 'nested keys stay' },
      devices: [{ os: 'ios' }],
    });
  });

  it('leaves out attributes that do not fit the cap and keeps the others, in order', () => {
    const json = filter.toJson({ targetingKey: 'u', a: 'x'.repeat(50), big: 'y'.repeat(200), b: 'z'.repeat(50), email: 'e' });
    expect(JSON.parse(json)).toEqual({ a: 'x'.repeat(50), b: 'z'.repeat(50) });
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(120);
    // Bytes, not characters: 50 three-byte characters are 150 bytes.
    expect(JSON.parse(filter.toJson({ wide: '日'.repeat(50), narrow: 'n' }))).toEqual({ narrow: 'n' });
  });

  it('keeps everything with an empty deny-list', () => {
    const open = new ContextAttributeFilter([], 4096);
    expect(open.toAttributes({ targetingKey: 'u', email: 'a@b.c' })).toEqual({ email: 'a@b.c' });
  });
});

class CollectingSink implements AnalyticsSink {
  readonly rows: AnalyticsRows['recent_contexts'][] = [];
  record<T extends AnalyticsTable>(table: T, row: AnalyticsRows[T]): boolean {
    if (table === 'recent_contexts') this.rows.push(row as AnalyticsRows['recent_contexts']);
    return true;
  }
  room(): number {
    return Infinity;
  }
}

const turn = () => new Promise((resolve) => setImmediate(resolve));
const entry = (targetingKey: string, at: number, context: Record<string, unknown> = {}): ContextEntry => ({
  at,
  serviceId: 'svc_1',
  environment: 'production',
  targetingKey,
  context: { targetingKey, ...context },
  results: [],
  bytes: 100,
});

describe('RecentContextRecorder', () => {
  const filter = new ContextAttributeFilter(['email'], 4096);
  const make = (sink: CollectingSink, overrides: Partial<{ maxTracked: number; maxPending: number }> = {}) =>
    new RecentContextRecorder({ sink, filter, intervalMs: 60_000, maxTracked: 1_000, maxPending: 1_000, ...overrides });

  it('writes a key once per interval however often it comes, on the next turn, filtered', async () => {
    const sink = new CollectingSink();
    const recorder = make(sink);
    recorder.offer(entry('u-1', 1_000, { plan: 'a', email: 'a@b.c' }));
    recorder.offer(entry('u-1', 2_000, { plan: 'b' }));
    recorder.offer(entry('u-2', 3_000, { plan: 'c' }));
    expect(sink.rows).toEqual([]);
    await turn();
    expect(sink.rows).toEqual([
      { seenAt: 1_000, serviceId: 'svc_1', environment: 'production', targetingKey: 'u-1', attributes: '{"plan":"a"}' },
      { seenAt: 3_000, serviceId: 'svc_1', environment: 'production', targetingKey: 'u-2', attributes: '{"plan":"c"}' },
    ]);
    // Still remembered in the next generation; written again once two generations have passed.
    recorder.offer(entry('u-1', 62_000));
    recorder.offer(entry('u-1', 100_000));
    recorder.offer(entry('u-1', 125_000, { plan: 'd' }));
    await turn();
    expect(sink.rows.map((row) => [row.targetingKey, row.seenAt])).toEqual([
      ['u-1', 1_000],
      ['u-2', 3_000],
      ['u-1', 125_000],
    ]);
  });

  it('keeps the same key of another environment or service apart', async () => {
    const sink = new CollectingSink();
    const recorder = make(sink);
    recorder.offer(entry('u-1', 1_000));
    recorder.offer({ ...entry('u-1', 1_001), environment: 'staging' });
    recorder.offer({ ...entry('u-1', 1_002), serviceId: 'svc_2' });
    await turn();
    expect(sink.rows.map((row) => `${row.serviceId}/${row.environment}`)).toEqual(['svc_1/production', 'svc_1/staging', 'svc_2/production']);
  });

  it('bounds memory: a full generation starts the next, and pending contexts past the bound are skipped', async () => {
    const sink = new CollectingSink();
    const recorder = make(sink, { maxTracked: 2, maxPending: 3 });
    for (const key of ['a', 'b', 'c', 'd']) recorder.offer(entry(key, 1_000));
    await turn();
    expect(sink.rows.map((row) => row.targetingKey)).toEqual(['a', 'b', 'c']);
    // Generations of two keys: 'a' and 'b' were forgotten when the third generation began.
    for (const key of ['e', 'a', 'b']) recorder.offer(entry(key, 2_000));
    await turn();
    expect(sink.rows.map((row) => row.targetingKey)).toEqual(['a', 'b', 'c', 'e', 'a', 'b']);
  });
});
