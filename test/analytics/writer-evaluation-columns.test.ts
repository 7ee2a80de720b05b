import { hashTargetingKey } from '../../api/features/evaluation/recorder';
import { ROLLOUT_SALT, bucket, compileFlag, evaluate, rolloutThreshold, type FlagDefinition } from '../../api/features/evaluation/engine/index';
import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { expectOfrepSingle } from '../support/ofrep-schema';
import { createFixture, createFlag, untilEvaluated, type DataPlaneFixture } from '../data-plane/support';

/**
 * Evaluation events record the rule that decided and the side of its partial rollout
 * (analytics/schema/031, the canary cohorts of docs/canary.md): exact values per case, through HTTP
 * evaluation then ClickHouse. Also: the writer's per-table state in /api/health/admin, and the
 * configured retention applied at start.
 */

let app: TestApp;
let fx: DataPlaneFixture;
let ops: TestUser;

beforeAll(async () => {
  app = await startTestApp({ ADMIN_EMAILS: 'writer-ops@example.com', ANALYTICS_RETENTION_DAYS: '45', ANALYTICS_ROLLUP_RETENTION_DAYS: '500' });
  fx = await createFixture(app);
  ops = await app.signup({ email: 'writer-ops@example.com', verified: true });
});
afterAll(() => app?.stop());

/** Targeting keys inside and outside a `percent` rollout of `flagKey`, found with the documented bucketing. */
function keysAround(flagKey: string, percent: number): { inside: string[]; outside: string[] } {
  const inside: string[] = [];
  const outside: string[] = [];
  for (let i = 0; inside.length < 2 || outside.length < 2; i++) {
    const key = `user-${i}`;
    (bucket(flagKey, key, ROLLOUT_SALT) < rolloutThreshold(percent) ? inside : outside).push(key);
  }
  return { inside: inside.slice(0, 2), outside: outside.slice(0, 2) };
}

interface Recorded {
  targeting_key_hash: string;
  reason: string;
  value: string;
  rule_id: string;
  rollout_side: string;
}

async function recorded(flagKey: string): Promise<Recorded[]> {
  await app.platform.analyticsWriter.flush();
  const rs = await app.platform.analytics.client.query({
    query: `SELECT targeting_key_hash, reason, value, rule_id, rollout_side FROM evaluation_events
            WHERE service_id = {serviceId:String} AND flag_key = {flagKey:String}`,
    query_params: { serviceId: fx.serviceId, flagKey },
    format: 'JSONEachRow',
  });
  return (await rs.json()) as Recorded[];
}

const evaluateRest = (flagKey: string, context: Record<string, unknown>) =>
  app.request('POST', '/api/flags/evaluate', { listener: 'data', token: fx.readToken, body: { flagKey, serviceId: fx.serviceId, context } });

describe('evaluation events: rule_id and rollout_side', () => {
  it('records the deciding rule and the rollout side for every case, exactly', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, {
      type: 'string',
      enabled: true,
      defaultValue: 'none',
      targeting: [
        { id: 'beta', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: 'B' },
        { id: 'canary', conditions: [{ property: 'country', operator: 'equals', value: 'FR' }], value: 'C', rolloutPercentage: 50 },
        { id: 'france', conditions: [{ property: 'country', operator: 'equals', value: 'FR' }], value: 'F' },
        { id: 'german-canary', conditions: [{ property: 'country', operator: 'equals', value: 'DE' }], value: 'G', rolloutPercentage: 50 },
      ],
    });
    const { inside, outside } = keysAround(flag.key, 50);
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId, context: { targetingKey: 'warm', plan: 'beta' } }, (r) => r.value === 'B', { token: fx.readToken });
    const before = (await recorded(flag.key)).length;

    const cases: { context: Record<string, unknown>; expected: Omit<Recorded, 'targeting_key_hash'> }[] = [
      // A rule without a rollout.
      { context: { targetingKey: 'full-1', plan: 'beta', country: 'FR' }, expected: { reason: 'TARGETING_MATCH', value: '"B"', rule_id: 'beta', rollout_side: '' } },
      // Inside the canary's 50%.
      { context: { targetingKey: inside[0], country: 'FR' }, expected: { reason: 'TARGETING_MATCH', value: '"C"', rule_id: 'canary', rollout_side: 'in' } },
      { context: { targetingKey: inside[1], country: 'FR' }, expected: { reason: 'TARGETING_MATCH', value: '"C"', rule_id: 'canary', rollout_side: 'in' } },
      // Outside it: the next rule serves, the row names the canary (its control cohort).
      { context: { targetingKey: outside[0], country: 'FR' }, expected: { reason: 'TARGETING_MATCH', value: '"F"', rule_id: 'canary', rollout_side: 'out' } },
      { context: { targetingKey: outside[1], country: 'FR' }, expected: { reason: 'TARGETING_MATCH', value: '"F"', rule_id: 'canary', rollout_side: 'out' } },
      // No rule's conditions hold: the default, nothing to record.
      { context: { targetingKey: 'nobody', country: 'US' }, expected: { reason: 'DEFAULT', value: '"none"', rule_id: '', rollout_side: '' } },
    ];
    // The German canary has nothing after it: outside means the default (same buckets: the rollout bucket is per flag).
    const german = [
      { context: { targetingKey: inside[0], country: 'DE' }, expected: { reason: 'TARGETING_MATCH', value: '"G"', rule_id: 'german-canary', rollout_side: 'in' } },
      { context: { targetingKey: outside[0], country: 'DE' }, expected: { reason: 'DEFAULT', value: '"none"', rule_id: 'german-canary', rollout_side: 'out' } },
    ];
    for (const c of [...cases, ...german]) {
      const res = await evaluateRest(flag.key, c.context);
      expect(res.status).toBe(200);
      expect(res.body.value).toBe(JSON.parse(c.expected.value));
    }
    // A partial rollout never holds a context without a targeting key: on neither side. Recorded
    // without a hash; checked apart below.
    expect((await evaluateRest(flag.key, { country: 'DE' })).body).toMatchObject({ value: 'none', reason: 'DEFAULT' });

    const rows = await recorded(flag.key);
    expect(rows).toHaveLength(before + cases.length + german.length + 1);
    const byHash = (key: string, expected: Omit<Recorded, 'targeting_key_hash'>) =>
      rows.filter((r) => r.targeting_key_hash === hashTargetingKey(key) && r.value === expected.value);
    for (const c of [...cases, ...german]) {
      expect(byHash(c.context.targetingKey as string, c.expected)).toEqual([{ targeting_key_hash: hashTargetingKey(c.context.targetingKey as string), ...c.expected }]);
    }
    expect(rows.filter((r) => r.targeting_key_hash === '')).toEqual([{ targeting_key_hash: '', reason: 'DEFAULT', value: '"none"', rule_id: '', rollout_side: '' }]);
  });

  it('records through OFREP, and for a missing flag', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, {
      type: 'boolean',
      enabled: true,
      defaultValue: false,
      targeting: [{ id: 'ramp', conditions: [], value: true, rolloutPercentage: 50 }],
    });
    const { inside, outside } = keysAround(flag.key, 50);
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId, context: { targetingKey: inside[0] } }, (r) => r.value === true, { token: fx.readToken });
    const before = await recorded(flag.key);
    const ofrep = async (targetingKey: string) => {
      const res = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${flag.key}`, { listener: 'data', token: fx.readToken, headers: { 'x-service-id': fx.serviceId }, body: { context: { targetingKey } } });
      expectOfrepSingle(res);
      return res;
    };
    expect((await ofrep(inside[1])).body.value).toBe(true);
    expect((await ofrep(outside[1])).body.value).toBe(false);
    const rows = (await recorded(flag.key)).filter((r) => !before.some((b) => JSON.stringify(b) === JSON.stringify(r)));
    expect(rows).toEqual(
      expect.arrayContaining([
        { targeting_key_hash: hashTargetingKey(inside[1]), reason: 'TARGETING_MATCH', value: 'true', rule_id: 'ramp', rollout_side: 'in' },
        { targeting_key_hash: hashTargetingKey(outside[1]), reason: 'DEFAULT', value: 'false', rule_id: 'ramp', rollout_side: 'out' },
      ]),
    );

    expect((await evaluateRest('no-such-flag', { targetingKey: inside[0] })).body.errorCode).toBe('FLAG_NOT_FOUND');
    expect(await recorded('no-such-flag')).toEqual([
      { targeting_key_hash: hashTargetingKey(inside[0]), reason: 'ERROR', value: 'null', rule_id: '', rollout_side: '' },
    ]);
  });

  it('keeps the side when the served value is a type mismatch (the canaried value errs for its cohort)', () => {
    const definition: FlagDefinition = {
      key: 'typed',
      type: 'boolean',
      enabled: true,
      defaultValue: 'not a boolean',
      variants: [],
      targeting: [{ id: 'ramp', conditions: [], value: 'oops', rolloutPercentage: 50 }],
    };
    const flag = compileFlag(definition);
    const { inside, outside } = keysAround('typed', 50);
    expect(evaluate(flag, 'typed', { targetingKey: inside[0] }, false)).toMatchObject({ reason: 'ERROR', errorCode: 'TYPE_MISMATCH', rolloutSide: 'in', rolloutRuleId: 'ramp' });
    expect(evaluate(flag, 'typed', { targetingKey: outside[0] }, false)).toMatchObject({ reason: 'ERROR', errorCode: 'TYPE_MISMATCH', rolloutSide: 'out', rolloutRuleId: 'ramp' });
    expect(evaluate(flag, 'typed', {}, false)).toMatchObject({ reason: 'ERROR', rolloutSide: undefined, rolloutRuleId: undefined });
  });
});

describe('writer state and retention on a running platform', () => {
  it('reports each table of the writer in /api/health/admin (administrators only)', async () => {
    const res = await ops.request('GET', '/api/health/admin');
    expect(res.status).toBe(200);
    const writer = res.body.analytics.writer;
    expect(Object.keys(writer).sort()).toEqual(
      ['admin_events', 'browser_events', 'client_errors', 'evaluation_events', 'outcome_events', 'recent_contexts', 'sdk_diagnostics', 'sdk_telemetry', 'web_vitals'],
    );
    expect(writer.evaluation_events).toMatchObject({ healthy: true, dropped: 0, written: expect.any(Number) });
    expect(writer.evaluation_events.written).toBeGreaterThan(0);
    expect(writer.outcome_events).toEqual({ healthy: true, buffered: 0, bufferedBytes: 0, inFlight: 0, written: 0, batches: 0, dropped: 0, failedBatches: 0, lastFlushAt: null, lastError: null });
    expect((await fx.owner.request('GET', '/api/health/admin')).status).toBe(403);
    expect((await app.request('GET', '/api/health/admin')).status).toBe(401);
  });

  it('applies ANALYTICS_RETENTION_DAYS and ANALYTICS_ROLLUP_RETENTION_DAYS at start', async () => {
    const rs = await app.platform.analytics.client.query({
      query: `SELECT name, extract(engine_full, 'toIntervalDay[(]([0-9]+)[)]') AS days FROM system.tables
              WHERE database = currentDatabase() AND name IN ('evaluation_events', 'outcome_events', 'evaluation_minutes', 'admin_events') ORDER BY name`,
      format: 'JSONEachRow',
    });
    expect(await rs.json()).toEqual([
      { name: 'admin_events', days: '500' },
      { name: 'evaluation_events', days: '45' },
      { name: 'evaluation_minutes', days: '500' },
      { name: 'outcome_events', days: '45' },
    ]);
  });
});
