import { compileFlag, evaluate, perInternedResult, type EvaluationContext, type FlagDefinition, type FlagType } from '../../api/features/evaluation/engine';
import cases from './cases.json';

interface EvaluationCase {
  name: string;
  flagKey: string;
  flag: FlagDefinition | null;
  context: EvaluationContext;
  defaultValue: unknown;
  expectedType?: FlagType;
  expected: { value: unknown; reason: string; variant?: string; errorCode?: string };
}

const evaluationCases = cases as unknown as EvaluationCase[];

describe('evaluation cases (test/evaluation/cases.json)', () => {
  it('holds hundreds of cases with unique names', () => {
    expect(evaluationCases.length).toBeGreaterThanOrEqual(300);
    expect(new Set(evaluationCases.map((entry) => entry.name)).size).toBe(evaluationCases.length);
  });

  it.each(evaluationCases.map((entry) => [entry.name, entry] as const))('%s', (_name, entry) => {
    const compiled = entry.flag === null ? undefined : compileFlag(entry.flag);
    const options = entry.expectedType === undefined ? undefined : { expectedType: entry.expectedType };
    const result = evaluate(compiled, entry.flagKey, entry.context, entry.defaultValue, options);
    expect({
      value: result.value,
      reason: result.reason,
      variant: result.variant,
      errorCode: result.errorCode,
    }).toEqual({
      value: entry.expected.value,
      reason: entry.expected.reason,
      variant: entry.expected.variant,
      errorCode: entry.expected.errorCode,
    });
    expect(result.flagKey).toBe(entry.flagKey);
  });
});

describe('evaluate result details', () => {
  const definition: FlagDefinition = {
    key: 'details',
    type: 'string',
    enabled: true,
    defaultValue: 'off',
    variants: [],
    targeting: [{ id: 'pro-users', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }], value: 'on' }],
  };

  it('names the matching rule', () => {
    const result = evaluate(compileFlag(definition), 'details', { plan: 'pro' }, 'x');
    expect(result.ruleId).toBe('pro-users');
    expect(result.disabled).toBeUndefined();
  });

  it('marks a disabled flag so OFREP can report DISABLED', () => {
    const result = evaluate(compileFlag({ ...definition, enabled: false }), 'details', { plan: 'pro' }, 'x');
    expect(result).toMatchObject({ value: 'off', reason: 'DEFAULT', disabled: true });
  });

  it('explains errors', () => {
    const missing = evaluate(undefined, 'nope', {}, 'x');
    expect(missing.errorMessage).toContain('nope');
    const mismatch = evaluate(compileFlag(definition), 'details', {}, 1, { expectedType: 'number' });
    expect(mismatch.errorMessage).toBe('value of type string does not match the requested type number');
  });

  it('reports what compilation set aside', () => {
    const compiled = compileFlag({
      ...definition,
      targeting: [{ id: 'bad', conditions: [{ property: 'plan', operator: 'like', value: 'p' }], value: 'on' }],
      variants: [{ name: 'neg', value: 'n', weight: -1 }],
    });
    expect(compiled.issues).toEqual([
      { ruleIndex: 0, ruleId: 'bad', message: expect.stringContaining('unknown operator "like"') },
      { ruleIndex: undefined, ruleId: undefined, message: expect.stringContaining('"neg"') },
    ]);
    expect(compiled.rules[0].usable).toBe(false);
  });
});

describe('interned results', () => {
  const definition: FlagDefinition = {
    key: 'checkout',
    type: 'boolean',
    enabled: true,
    defaultValue: false,
    variants: [],
    targeting: [{ id: 'half', conditions: [], value: true, rolloutPercentage: 50 }],
  };
  const keys = Array.from({ length: 200 }, (_, i) => `user-${i}`);

  it('gives every caller served alike the same frozen result, and different outcomes different ones', () => {
    const flag = compileFlag(definition);
    const results = keys.map((targetingKey) => evaluate(flag, 'checkout', { targetingKey }, undefined));
    const distinct = new Set(results);
    // Inside the rollout (TARGETING_MATCH, side in) and outside it (DEFAULT, side out): two objects.
    expect(distinct.size).toBe(2);
    for (const r of distinct) expect(Object.isFrozen(r)).toBe(true);
    expect([...distinct].map((r) => [r.reason, r.rolloutSide]).sort()).toEqual([['DEFAULT', 'out'], ['TARGETING_MATCH', 'in']]);
    expect(() => {
      (results[0] as { value: unknown }).value = 'changed';
    }).toThrow(TypeError);
  });

  it('starts afresh for a recompiled flag, and never shares errors (they carry the caller’s default)', () => {
    const before = evaluate(compileFlag(definition), 'checkout', { targetingKey: 'user-1' }, undefined);
    const after = evaluate(compileFlag(definition), 'checkout', { targetingKey: 'user-1' }, undefined);
    expect(after).toEqual(before);
    expect(after).not.toBe(before);
    const flag = compileFlag(definition);
    const a = evaluate(flag, 'checkout', { targetingKey: 'user-1' }, 'one', { expectedType: 'string' });
    const b = evaluate(flag, 'checkout', { targetingKey: 'user-1' }, 'two', { expectedType: 'string' });
    expect([a.errorCode, a.value, b.value]).toEqual(['TYPE_MISMATCH', 'one', 'two']);
    expect(Object.isFrozen(a)).toBe(false);
  });

  it('keeps what is derived from an interned result, and derives it again for the others', () => {
    const flag = compileFlag(definition);
    let derived = 0;
    const entry = perInternedResult((r) => `${++derived}:${String(r.value)}`);
    const served = evaluate(flag, 'checkout', { targetingKey: 'user-1' }, undefined);
    expect(entry(served)).toBe(entry(evaluate(flag, 'checkout', { targetingKey: 'user-1' }, undefined)));
    const error = () => evaluate(flag, 'checkout', { targetingKey: 'user-1' }, 'x', { expectedType: 'string' });
    expect(entry(error())).not.toBe(entry(error()));
    expect(derived).toBe(3);
  });
});
