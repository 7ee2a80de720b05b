import { compileFlag, evaluate, type EvaluationContext, type FlagDefinition, type FlagType } from '../../api/features/evaluation/engine';
import { explainFlag } from '../../api/features/evaluation/engine/explain';
import cases from '../evaluation/cases.json';

interface EvaluationCase {
  name: string;
  flagKey: string;
  flag: FlagDefinition | null;
  context: EvaluationContext;
  defaultValue: unknown;
  expectedType?: FlagType;
}

const evaluationCases = cases as unknown as EvaluationCase[];

describe('explain agrees with evaluate on every case of test/evaluation/cases.json', () => {
  it.each(evaluationCases.map((entry) => [entry.name, entry] as const))('%s', (_name, entry) => {
    const compiled = entry.flag === null ? undefined : compileFlag(entry.flag);
    const flag = entry.flag === null || compiled === undefined ? undefined : { definition: entry.flag, compiled };
    const evaluated = evaluate(compiled, entry.flagKey, entry.context, entry.defaultValue, { expectedType: entry.expectedType });
    const explained = explainFlag(flag, entry.flagKey, entry.context, entry.defaultValue, entry.expectedType);
    expect({ value: explained.value, reason: explained.reason, variant: explained.variant, ruleId: explained.ruleId, errorCode: explained.errorCode }).toEqual({
      value: evaluated.value,
      reason: evaluated.reason,
      variant: evaluated.variant,
      ruleId: evaluated.ruleId,
      errorCode: evaluated.errorCode,
    });
    // Exactly one rule is marked matched, and only when evaluation names it.
    const matched = explained.rules.filter((rule) => rule.matched);
    expect(matched.map((rule) => rule.id)).toEqual(evaluated.ruleId === undefined ? [] : [evaluated.ruleId]);
  });
});

describe('explanation details', () => {
  const definition: FlagDefinition = {
    key: 'checkout',
    type: 'string',
    enabled: true,
    defaultValue: 'off',
    targeting: [
      {
        id: 'eu-enterprise',
        conditions: [
          { property: 'country', operator: 'in', value: ['FR', 'DE'] },
          { property: 'plan', operator: 'equals', value: 'enterprise' },
        ],
        value: 'enterprise',
      },
      { id: 'nobody-ramp', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }], value: 'ramp', rolloutPercentage: 0 },
      { id: 'pro', conditions: [{ property: 'account.tier', operator: 'equals', value: 'gold' }], value: 'gold' },
      { id: 'never-reached', conditions: [], value: 'late' },
    ],
    variants: [],
  };
  const flag = { definition, compiled: compileFlag(definition) };

  it('says per condition why earlier rules did not match, with the rollout and the matching rule', () => {
    const explained = explainFlag(flag, 'checkout', { targetingKey: 'user-7', country: 'US', plan: 'pro', account: { tier: 'gold' } }, undefined);
    expect(explained).toMatchObject({ value: 'gold', reason: 'TARGETING_MATCH', ruleId: 'pro' });
    expect(explained.rules).toEqual([
      {
        id: 'eu-enterprise',
        matched: false,
        conditions: [
          { property: 'country', operator: 'in', expected: ['FR', 'DE'], actual: 'US', passed: false },
          { property: 'plan', operator: 'equals', expected: 'enterprise', actual: 'pro', passed: false },
        ],
      },
      {
        id: 'nobody-ramp',
        matched: false,
        conditions: [{ property: 'plan', operator: 'equals', expected: 'pro', actual: 'pro', passed: true }],
        rollout: { percentage: 0, bucket: expect.any(Number), included: false },
      },
      { id: 'pro', matched: true, conditions: [{ property: 'account.tier', operator: 'equals', expected: 'gold', actual: 'gold', passed: true }] },
    ]);
  });

  it('reports the variant bucket that chose the variant', () => {
    const variants: FlagDefinition = { ...definition, targeting: [], variants: [{ name: 'a', value: 'A', weight: 50 }, { name: 'b', value: 'B', weight: 50 }] };
    const explained = explainFlag({ definition: variants, compiled: compileFlag(variants) }, 'checkout', { targetingKey: 'user-7' }, undefined);
    expect(explained.reason).toBe('VARIANT');
    expect(explained.bucket).toBeGreaterThanOrEqual(0);
    expect(explained.bucket).toBeLessThan(100);
    expect(explained.variant).toBe(explained.bucket! < 50 ? 'a' : 'b');
  });

  it('says why a stored rule that cannot compile never matches', () => {
    const broken: FlagDefinition = { ...definition, targeting: [{ id: 'bad', conditions: [{ property: 'p', operator: 'like', value: 1 }], value: 'x' }] };
    const explained = explainFlag({ definition: broken, compiled: compileFlag(broken) }, 'checkout', { p: 1 }, undefined);
    expect(explained.reason).toBe('DEFAULT');
    expect(explained.rules).toEqual([{ id: 'bad', matched: false, conditions: [], issue: expect.stringContaining('like') }]);
  });
});
