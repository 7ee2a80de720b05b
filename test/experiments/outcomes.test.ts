import { startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, type Project } from '../webhooks/support';
import { auditOf, createExperiment, createVariantFlag, experimentBody, getFlag, newKey, variantOf, weightsOf } from './support';

/**
 * A bandit's evidence from the warehouse (docs/experiments.md "Rewards" and "Guardrail"):
 * known evaluation and outcome rows inserted into chDB through the app's analytics client, then
 * a reallocation over HTTP, and exactly what counted.
 */

let app: TestApp;
let p: Project;

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
}, 60_000);
afterAll(async () => {
  await app?.stop();
});

const ts = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);

function rows(flagKey: string) {
  const base = { project_id: p.projectId, service_id: p.serviceId, environment: 'production' };
  return {
    evaluation: (key: string, variant: string, value: string, at: number, extra: Record<string, unknown> = {}) => ({
      ...base,
      timestamp: ts(at),
      flag_key: flagKey,
      reason: 'VARIANT',
      variant,
      value,
      latency_ms: 1,
      error_code: '',
      rule_id: '',
      rollout_side: '',
      targeting_key_hash: key,
      source: 'rest',
      ...extra,
    }),
    outcome: (event: string, key: string, at: number, flags: Record<string, string> = {}) => ({
      ...base,
      timestamp: ts(at),
      event,
      targeting_key_hash: key,
      value: null,
      flags,
      origin: 'track',
      event_id: `${event}-${key}-${at}-${Math.random()}`,
    }),
  };
}

const range = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

async function insert(table: 'evaluation_events' | 'outcome_events', values: unknown[]) {
  await app.platform.analytics.client.insert({ table, values, format: 'JSONEachRow' });
}

describe('bandit rewards from outcome events', () => {
  it('counts distinct served keys as trials and their attributed conversions as successes, added to reward-API counts', async () => {
    const key = newKey('events');
    await createVariantFlag(p.owner, p.serviceId, key);
    const exp = await createExperiment(p.member, experimentBody(p, key, { conversionEvent: 'purchase' }));
    const at = Math.max(Date.now(), Date.parse(exp.startedAt) + 1);
    const { evaluation, outcome } = rows(key);
    await insert('evaluation_events', [
      ...range('c', 100).map((k) => evaluation(k, 'control', '"blue"', at)),
      ...range('t', 100).map((k) => evaluation(k, 'treatment', '"green"', at)),
      // t0 evaluated twice: still one trial.
      evaluation('t0', 'treatment', '"green"', at + 1),
      // s1 was served control, then treatment: one trial of treatment (its last arm).
      evaluation('s1', 'control', '"blue"', at),
      evaluation('s1', 'treatment', '"green"', at + 1),
      // Not counted: before the experiment started, another flag.
      evaluation('old', 'control', '"blue"', Date.parse(exp.startedAt) - 60_000),
      { ...evaluation('x1', 'control', '"blue"', at), flag_key: `${key}-other` },
    ]);
    await insert('outcome_events', [
      ...range('c', 5).map((k) => outcome('purchase', k, at + 5)),
      ...range('t', 25).map((k) => outcome('purchase', k, at + 5)),
      // A second conversion of one key counts once.
      outcome('purchase', 't0', at + 6),
      outcome('purchase', 's1', at + 5),
      // Not counted: the flags map names control's value but t30 was served treatment; another
      // event name; a key never served; a key served only before the start.
      outcome('purchase', 't30', at + 5, { [key]: '"blue"' }),
      outcome('signup', 'c50', at + 5),
      outcome('purchase', 'ghost', at + 5),
      outcome('purchase', 'old', at + 5),
      // Counted: the flags map agrees with what the key was served.
      outcome('purchase', 'c60', at + 5, { [key]: '"blue"' }),
    ]);
    expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/reward`, { variantName: 'control', converted: true }), 200, 'reward');

    const res = await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`);
    expectStatus(res, 200, 'reallocate');
    expect(variantOf(res.body, 'control')).toMatchObject({ trials: 101, successes: 7, sources: { rewards: { trials: 1, successes: 1 }, events: { trials: 100, successes: 6 } } });
    expect(variantOf(res.body, 'treatment')).toMatchObject({ trials: 101, successes: 26, sources: { rewards: { trials: 0, successes: 0 }, events: { trials: 101, successes: 26 } } });
    expect(variantOf(res.body, 'treatment').allocation).toBeGreaterThan(0.5);
    expect(weightsOf(await getFlag(p, key)).treatment).toBeGreaterThan(50);
    expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/stop`), 200, 'stop');
  });
});

describe('bandit errors guardrail', () => {
  it('cuts an arm with a clearly worse error rate to the floor, audits it with the statistic, and keeps it there', async () => {
    const key = newKey('guard');
    await createVariantFlag(p.owner, p.serviceId, key, [
      { name: 'a', value: 'red', weight: 34 },
      { name: 'b', value: 'green', weight: 33 },
      { name: 'c', value: 'blue', weight: 33 },
    ]);
    // Rewards alone would change nothing yet (1,000 trials needed): only the cut moves traffic.
    const exp = await createExperiment(p.member, experimentBody(p, key, { minSampleSizePerVariant: 1_000, minExplorationFloor: 0.1 }));
    const at = Math.max(Date.now(), Date.parse(exp.startedAt) + 1);
    const { evaluation, outcome } = rows(key);
    await insert('evaluation_events', [
      ...range('a', 500).map((k) => evaluation(k, 'a', '"red"', at)),
      ...range('b', 500).map((k) => evaluation(k, 'b', '"green"', at)),
      ...range('c', 499).map((k) => evaluation(k, 'c', '"blue"', at)),
      // A failed evaluation of c: a request, and no application error.
      evaluation('c499', 'c', '"blue"', at, { error_code: 'GENERAL' }),
    ]);
    await insert('outcome_events', [
      ...range('a', 100).map((k) => outcome('error', k, at + 5)),
      // No evaluation of this key, but its flags map names a's value: an error of a.
      outcome('error', 'unseen', at + 5, { [key]: '"red"' }),
      ...range('b', 5).map((k) => outcome('error', k, at + 5)),
      ...range('c', 4).map((k) => outcome('error', k, at + 5)),
    ]);

    const res = await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`);
    expectStatus(res, 200, 'reallocate');
    const a = variantOf(res.body, 'a');
    expect(a.allocation).toBeCloseTo(0.1, 6);
    expect(variantOf(res.body, 'b').allocation).toBeCloseTo(0.45, 6);
    expect(variantOf(res.body, 'c').allocation).toBeCloseTo(0.45, 6);
    expect(a.cut).toMatchObject({ errorRate: 101 / 500, bestErrorRate: 4 / 500 });
    expect(a.cut.statistic).toBeGreaterThan(0);
    expect(a.cut.interval.lower).toBeGreaterThan(0);
    expect(variantOf(res.body, 'b').cut).toBeNull();
    expect(variantOf(res.body, 'c').cut).toBeNull();
    expect(weightsOf(await getFlag(p, key))).toEqual({ a: 10, b: 45, c: 45 });

    const audit = await auditOf(app, key);
    const cuts = audit.filter((e) => e.action === 'experiment.arm_cut');
    expect(cuts).toHaveLength(1);
    expect(cuts[0].actor).toBe(`bandit:${exp.id}`);
    expect(cuts[0].metadata).toMatchObject({ variant: 'a', flagKey: key, guardrail: { name: 'a', comparedWith: 'c', errorRate: 101 / 500 } });
    expect(cuts[0].metadata.guardrail.statistic).toBe(a.cut.statistic);
    const change = audit.filter((e) => e.action === 'flag.update').pop()!;
    expect(change.metadata.bandit.cuts[0]).toMatchObject({ name: 'a' });

    // The cut arm stays at the floor, and is not cut (audited) again.
    const again = await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`);
    expect(variantOf(again.body, 'a').allocation).toBeCloseTo(0.1, 6);
    expect((await auditOf(app, key)).filter((e) => e.action === 'experiment.arm_cut')).toHaveLength(1);
    expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/stop`), 200, 'stop');
  });
});
