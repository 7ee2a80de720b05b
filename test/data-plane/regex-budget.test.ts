import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { EvaluationService } from '../../api/gen/flags/v1/evaluation_pb';
import { startTestApp, type TestApp } from '../support/harness';
import { expectOfrepBulk } from '../support/ofrep-schema';
import { createFixture, createFlag, uniqueKey, untilEvaluated, type DataPlaneFixture } from './support';

/**
 * The work of one evaluation request is bounded whatever its flag count, rule count
 * or input. Small budgets here (5,000 condition units, 5 ms of patterns) so that a request
 * over them is cheap to build; the defaults and the worst request are measured by bench:regex.
 */
const CONDITION_BUDGET = 5000;
const REGEX_BUDGET_MS = 5;

let app: TestApp;
let fx: DataPlaneFixture;
let client: Client<typeof EvaluationService>;

beforeAll(async () => {
  app = await startTestApp({ EVAL_BUDGET_CONDITIONS: String(CONDITION_BUDGET), EVAL_BUDGET_REGEX_MS: String(REGEX_BUDGET_MS) });
  fx = await createFixture(app);
  client = createClient(EvaluationService, createConnectTransport({ baseUrl: `${app.urls.data}/api/connect`, httpVersion: '1.1' }));
});
afterAll(() => app?.stop());

const auth = () => ({ headers: { Authorization: `Bearer ${fx.readToken}` } });

/** `count` rules of one `matches` condition each on `ua`. */
const matchesRules = (count: number, pattern = (i: number) => `^agent-${i}$`) =>
  Array.from({ length: count }, (_, i) => ({ id: `m${i}`, conditions: [{ property: 'ua', operator: 'matches', value: pattern(i) }], value: true }));

/** Routes report body paths (`body.targeting`), bulk and import items paths within the item. */
function expectTargetingCap(details: { path: string; message: string }[] | undefined, path = 'targeting') {
  expect(details).toEqual(expect.arrayContaining([{ path, message: expect.stringMatching(/at most 20 "matches" conditions per flag/) }]));
}

describe('matches conditions per flag (write time)', () => {
  it('refuses a 21st matches condition with 400 and the validation envelope on create and update', async () => {
    const refused = await fx.owner.request('POST', '/api/flags', {
      key: uniqueKey('re'),
      serviceId: fx.serviceId,
      environment: 'development',
      targeting: matchesRules(21),
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: expect.any(String), message: expect.stringMatching(/^Validation failed/) });
    expectTargetingCap(refused.body.details, 'body.targeting');

    // Twenty over several rules are fine, also next to other operators.
    const twenty = matchesRules(10).map((rule, i) => ({
      ...rule,
      conditions: [...rule.conditions, { property: 'ua', operator: 'matches', value: `-${i}$` }, { property: 'plan', operator: 'equals', value: 'pro' }],
    }));
    const flag = await createFlag(fx.owner, fx.serviceId, { targeting: twenty });
    const patch = await fx.owner.request('PATCH', `/api/flags/${flag.key}?serviceId=${fx.serviceId}&environment=development`, {
      targeting: [...twenty, ...matchesRules(1)],
    });
    expect(patch.status).toBe(400);
    expectTargetingCap(patch.body.details, 'body.targeting');
  });

  it('refuses it on the bulk and import write paths as well', async () => {
    const bulk = await fx.owner.request('POST', '/api/flags/bulk', {
      flags: [{ key: uniqueKey('re'), serviceId: fx.serviceId, environment: 'development', targeting: matchesRules(21) }],
    });
    expect(bulk.body.results[0]).toMatchObject({ status: 'failure', statusCode: 400 });
    expectTargetingCap(bulk.body.results[0].details);

    const imported = await fx.owner.request('POST', `/api/flags/import?projectId=${fx.projectId}`, {
      version: '1.0',
      flags: [{ key: uniqueKey('re'), serviceId: fx.serviceId, environment: 'development', type: 'boolean', targeting: matchesRules(21) }],
    });
    expect(imported.body.results[0]).toMatchObject({ status: 'failed', statusCode: 400 });
    expectTargetingCap(imported.body.results[0].details);
  });
});

describe('input length a pattern sees', () => {
  it('tests attributes of up to 1,024 characters; longer ones never match', async () => {
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: true, targeting: matchesRules(1, () => 'a$') });
    const evaluate = (ua: string) => ({ flagKey: flag.key, serviceId: fx.serviceId, context: { targetingKey: 'u', ua } });
    await untilEvaluated(app, evaluate('a'.repeat(1024)), (r) => r.reason === 'TARGETING_MATCH', { token: fx.readToken, listener: 'data' });
    const long = await app.request('POST', '/api/flags/evaluate', { token: fx.readToken, listener: 'data', body: evaluate('a'.repeat(1025)) });
    expect(long.body).toMatchObject({ value: false, reason: 'DEFAULT' });
  });
});

describe('Connect ResolveAll flag_keys', () => {
  it('refuses more than 100 distinct keys with INVALID_ARGUMENT', async () => {
    const flagKeys = Array.from({ length: 101 }, (_, i) => `k-${i}`);
    const error = await client.resolveAll({ serviceId: fx.serviceId, flagKeys, context: {} }, auth()).then(
      () => undefined,
      (e) => e,
    );
    expect(ConnectError.from(error).code).toBe(Code.InvalidArgument);
    expect(ConnectError.from(error).rawMessage).toMatch(/at most 100 distinct keys/);
  });

  it('evaluates each key once: 500 copies of one key are one evaluation, within the budget', async () => {
    // 50 conditions: 51 units a time, so 500 evaluations would be five times the budget.
    const conditions = Array.from({ length: 50 }, (_, i) => ({ property: `p${i}`, operator: 'exists' }));
    const flag = await createFlag(fx.owner, fx.serviceId, { enabled: true, targeting: [{ id: 'wide', conditions, value: true }] });
    await untilEvaluated(app, { flagKey: flag.key, serviceId: fx.serviceId }, (r) => r.reason === 'DEFAULT', { token: fx.readToken, listener: 'data' });
    const res = await client.resolveAll({ serviceId: fx.serviceId, flagKeys: Array(500).fill(flag.key), context: {} }, auth());
    expect(Object.keys(res.flags)).toEqual([flag.key]);
    expect(res.flags[flag.key]).toMatchObject({ reason: 'DEFAULT', errorCode: '' });
  });
});

describe('per-request work budget', () => {
  let heavy: DataPlaneFixture;
  const regexKeys: string[] = [];
  let wideKey: string;
  const hostile = { targetingKey: 'u', ua: 'a'.repeat(1024) };

  beforeAll(async () => {
    heavy = await createFixture(app);
    // Quadratic on this input, and accepted at write time: each match takes a fraction of a
    // millisecond or more, 200 of them far more than 5 ms on any machine.
    for (let i = 0; i < 10; i++) {
      regexKeys.push((await createFlag(heavy.owner, heavy.serviceId, { enabled: true, targeting: matchesRules(20, () => '.*foo.*') })).key);
    }
    // 200 rules of 25 conditions: 5,001 units, over the condition budget by itself.
    const conditions = Array.from({ length: 25 }, (_, i) => ({ property: `p${i}`, operator: 'equals', value: 'x' }));
    const wide = Array.from({ length: 200 }, (_, i) => ({ id: `w${i}`, conditions, value: true }));
    wideKey = (await createFlag(heavy.owner, heavy.serviceId, { enabled: true, targeting: wide })).key;
    for (const key of [...regexKeys, wideKey]) {
      await untilEvaluated(app, { flagKey: key, serviceId: heavy.serviceId, context: { ua: 'x' } }, (r) => r.errorCode !== 'FLAG_NOT_FOUND', { token: heavy.readToken, listener: 'data' });
    }
  });

  it('REST batch: flags past the pattern-time budget answer ERROR / GENERAL with their defaults, and the request completes', async () => {
    const res = await app.request('POST', '/api/flags/evaluate/batch', {
      token: heavy.readToken,
      listener: 'data',
      body: { serviceId: heavy.serviceId, context: hostile, flags: regexKeys.map((flagKey) => ({ flagKey, defaultValue: 'fallback' })) },
    });
    expect(res.status).toBe(200);
    const results = res.body.results as { reason: string; value: unknown; errorCode?: string; errorMessage?: string }[];
    const firstError = results.findIndex((r) => r.reason === 'ERROR');
    expect(firstError).toBeGreaterThanOrEqual(0);
    expect(results.slice(0, firstError).every((r) => r.reason === 'DEFAULT' && r.value === false)).toBe(true);
    for (const r of results.slice(firstError)) {
      expect(r).toMatchObject({ reason: 'ERROR', value: 'fallback', errorCode: 'GENERAL', errorMessage: expect.stringMatching(/budget/) });
    }
  });

  it('a flag over the condition budget is ERROR / GENERAL on single evaluation, deterministically', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await app.request('POST', '/api/flags/evaluate', {
        token: heavy.readToken,
        listener: 'data',
        body: { flagKey: wideKey, serviceId: heavy.serviceId, defaultValue: true, context: {} },
      });
      expect(res.body).toMatchObject({ value: true, reason: 'ERROR', errorCode: 'GENERAL' });
    }
  });

  it('OFREP bulk: exhausted flags are entries with errorCode GENERAL', async () => {
    const res = await app.request('POST', '/api/ofrep/v1/evaluate/flags', {
      token: heavy.readToken,
      listener: 'data',
      headers: { 'x-service-id': heavy.serviceId },
      body: { context: hostile },
    });
    expect(res.status).toBe(200);
    expectOfrepBulk(res);
    const flags = res.body.flags as { key: string; errorCode?: string; errorDetails?: string }[];
    expect(flags).toHaveLength(11);
    const failed = flags.filter((f) => f.errorCode !== undefined);
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(failed.map((f) => f.key)).toContain(wideKey);
    for (const f of failed) expect(f).toMatchObject({ errorCode: 'GENERAL', errorDetails: expect.stringMatching(/budget/) });
  });

  it('Connect ResolveAll: exhausted flags have reason ERROR and errorCode GENERAL', async () => {
    const res = await client.resolveAll({ serviceId: heavy.serviceId, context: hostile }, { headers: { Authorization: `Bearer ${heavy.readToken}` } });
    const entries = Object.values(res.flags);
    expect(entries).toHaveLength(11);
    const failed = entries.filter((f) => f.reason === 'ERROR');
    expect(failed.length).toBeGreaterThanOrEqual(1);
    for (const f of failed) expect(f.errorCode).toBe('GENERAL');
    expect(res.flags[wideKey]).toMatchObject({ reason: 'ERROR', errorCode: 'GENERAL' });
  });
});
