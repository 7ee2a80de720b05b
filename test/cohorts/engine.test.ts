import {
  EvaluationBudget,
  compileCohort,
  compileFlag,
  cohortRuleMatched,
  evaluate,
  validateCondition,
  type CohortDefinition,
  type FlagDefinition,
} from '../../api/features/evaluation/engine';
import { explainFlag } from '../../api/features/evaluation/engine/explain';

/**
 * The in_cohort operator in the engine (docs/evaluation.md#operators): compiled from the project's
 * cohorts, evaluated without lookups.
 */

const betaTesters: CohortDefinition = {
  id: 'coh_beta',
  rules: [
    { id: 'staff', conditions: [{ property: 'email', operator: 'ends_with', value: '@staff.example.com' }] },
    {
      id: 'eu-pro',
      conditions: [
        { property: 'country', operator: 'in', value: ['FR', 'DE'] },
        { property: 'plan', operator: 'equals', value: 'pro' },
      ],
    },
  ],
};
const cohorts = new Map([[betaTesters.id, betaTesters]]);

const flag = (cohortId: string, extra: Partial<FlagDefinition> = {}): FlagDefinition => ({
  key: 'new-checkout',
  type: 'string',
  enabled: true,
  defaultValue: 'old',
  variants: [],
  targeting: [{ id: 'beta', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: cohortId }], value: 'new' }],
  ...extra,
});

describe('in_cohort', () => {
  it('holds when any cohort rule has all its conditions holding', () => {
    const compiled = compileFlag(flag('coh_beta'), cohorts);
    expect(compiled.issues).toEqual([]);
    expect(compiled.cohortIds).toEqual(['coh_beta']);
    expect(evaluate(compiled, 'new-checkout', { targetingKey: 'u1', email: 'ann@staff.example.com' }, null)).toMatchObject({ value: 'new', reason: 'TARGETING_MATCH', ruleId: 'beta' });
    expect(evaluate(compiled, 'new-checkout', { targetingKey: 'u2', country: 'DE', plan: 'pro' }, null)).toMatchObject({ value: 'new', ruleId: 'beta' });
    // Only one of the second rule's conditions: not a member.
    expect(evaluate(compiled, 'new-checkout', { targetingKey: 'u3', country: 'DE', plan: 'free' }, null)).toMatchObject({ value: 'old', reason: 'DEFAULT' });
  });

  it('does not read its property: a context without targetingKey is still tested', () => {
    const compiled = compileFlag(flag('coh_beta'), cohorts);
    expect(evaluate(compiled, 'new-checkout', { email: 'bob@staff.example.com' }, null)).toMatchObject({ value: 'new', ruleId: 'beta' });
    const otherProperty = compileFlag(
      flag('coh_beta', { targeting: [{ id: 'beta', conditions: [{ property: 'anything.at.all', operator: 'in_cohort', value: 'coh_beta' }], value: 'new' }] }),
      cohorts,
    );
    expect(evaluate(otherProperty, 'new-checkout', { email: 'bob@staff.example.com' }, null)).toMatchObject({ value: 'new' });
  });

  it('never holds for a cohort unknown at compile time, and says so in the issues', () => {
    const compiled = compileFlag(flag('coh_gone'), cohorts);
    expect(compiled.cohortIds).toEqual(['coh_gone']);
    expect(compiled.issues).toEqual([{ ruleIndex: 0, ruleId: 'beta', message: expect.stringContaining('coh_gone') }]);
    expect(evaluate(compiled, 'new-checkout', { targetingKey: 'u1', email: 'ann@staff.example.com' }, null)).toMatchObject({ value: 'old', reason: 'DEFAULT' });
    // Without any lookup (a flag compiled outside a project) the same.
    expect(evaluate(compileFlag(flag('coh_beta')), 'new-checkout', { email: 'ann@staff.example.com' }, null)).toMatchObject({ value: 'old' });
  });

  it('takes the cohort as it was when the flag was compiled: a changed cohort needs a recompile', () => {
    const lookup = new Map([[betaTesters.id, betaTesters]]);
    const before = compileFlag(flag('coh_beta'), lookup);
    lookup.set('coh_beta', { id: 'coh_beta', rules: [{ id: 'everyone', conditions: [] }] });
    const after = compileFlag(flag('coh_beta'), lookup);
    expect(evaluate(before, 'new-checkout', { targetingKey: 'u9' }, null).value).toBe('old');
    expect(evaluate(after, 'new-checkout', { targetingKey: 'u9' }, null).value).toBe('new');
  });

  it('charges the cohort conditions to the request budget', () => {
    const plain = compileFlag(flag('coh_none'));
    const withCohort = compileFlag(flag('coh_beta'), cohorts);
    // Three conditions of the cohort (one a suffix test) on top of the flag's own.
    expect(withCohort.cost).toBeGreaterThan(plain.cost + 3);
    const budget = new EvaluationBudget({ conditions: withCohort.cost - 1, regexMs: 50 }, () => performance.now());
    expect(evaluate(withCohort, 'new-checkout', { email: 'ann@staff.example.com' }, null, { budget })).toMatchObject({ reason: 'ERROR', errorCode: 'GENERAL' });
  });

  it('is validated at write time as a cohort id', () => {
    expect(validateCondition({ property: 'targetingKey', operator: 'in_cohort', value: 'coh_1' })).toBeNull();
    for (const value of [undefined, '', 5, ['coh_1'], 'x'.repeat(129)]) {
      expect(validateCondition({ property: 'targetingKey', operator: 'in_cohort', value })).toContain('cohort id');
    }
  });
});

describe('compileCohort', () => {
  it('reports the first matching rule', () => {
    const compiled = compileCohort(betaTesters);
    expect(compiled.ruleIds).toEqual(['staff', 'eu-pro']);
    expect(cohortRuleMatched(compiled, { email: 'x@staff.example.com', country: 'FR', plan: 'pro' }, undefined)).toBe(0);
    expect(cohortRuleMatched(compiled, { country: 'FR', plan: 'pro' }, undefined)).toBe(1);
    expect(cohortRuleMatched(compiled, {}, undefined)).toBe(-1);
    expect(cohortRuleMatched(compileCohort({ id: 'empty', rules: [] }), { any: 1 }, undefined)).toBe(-1);
  });

  it('sets aside a stored rule that uses in_cohort (cohorts do not nest) or cannot compile', () => {
    const compiled = compileCohort({
      id: 'coh_nested',
      rules: [
        { id: 'nested', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: 'coh_beta' }] },
        { id: 'broken', conditions: [{ property: 'p', operator: 'like', value: 1 }] },
        { id: 'ok', conditions: [{ property: 'p', operator: 'equals', value: 1 }] },
      ],
    });
    expect(compiled.ruleIds).toEqual(['ok']);
    expect(compiled.issues).toEqual([expect.stringContaining('do not nest'), expect.stringContaining('like')]);
    // The flag that uses such a cohort carries the cohort's issues.
    const flagIssues = compileFlag(flag('coh_nested'), new Map([['coh_nested', { id: 'coh_nested', rules: [{ id: 'nested', conditions: [{ property: 'k', operator: 'in_cohort', value: 'x' }] }] }]])).issues;
    expect(flagIssues).toEqual([{ ruleIndex: 0, ruleId: 'beta', message: expect.stringContaining('do not nest') }]);
  });
});

describe('explain of in_cohort', () => {
  it('shows the cohort rule that matched as the actual value, agreeing with evaluate', () => {
    const definition = flag('coh_beta', {
      targeting: [
        { id: 'beta', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: 'coh_beta' }, { property: 'app', operator: 'equals', value: 'ios' }], value: 'new' },
        { id: 'all-beta', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: 'coh_beta' }], value: 'web' },
      ],
    });
    const compiled = compileFlag(definition, cohorts);
    const context = { targetingKey: 'u2', country: 'FR', plan: 'pro', app: 'web' };
    const explained = explainFlag({ definition, compiled }, 'new-checkout', context, null);
    expect(explained).toMatchObject({ value: 'web', ruleId: 'all-beta', reason: 'TARGETING_MATCH' });
    expect(evaluate(compiled, 'new-checkout', context, null)).toMatchObject({ value: explained.value, ruleId: explained.ruleId });
    expect(explained.rules).toEqual([
      {
        id: 'beta',
        matched: false,
        conditions: [
          { property: 'targetingKey', operator: 'in_cohort', expected: 'coh_beta', actual: { cohortId: 'coh_beta', member: true, matchedRuleId: 'eu-pro' }, passed: true },
          { property: 'app', operator: 'equals', expected: 'ios', actual: 'web', passed: false },
        ],
      },
      {
        id: 'all-beta',
        matched: true,
        conditions: [{ property: 'targetingKey', operator: 'in_cohort', expected: 'coh_beta', actual: { cohortId: 'coh_beta', member: true, matchedRuleId: 'eu-pro' }, passed: true }],
      },
    ]);
  });

  it('says why an unknown cohort never holds', () => {
    const definition = flag('coh_gone');
    const explained = explainFlag({ definition, compiled: compileFlag(definition, cohorts) }, 'new-checkout', { targetingKey: 'u1' }, null);
    expect(explained.rules).toEqual([
      {
        id: 'beta',
        matched: false,
        conditions: [{ property: 'targetingKey', operator: 'in_cohort', expected: 'coh_gone', actual: { cohortId: 'coh_gone', member: false, matchedRuleId: null }, passed: false }],
        issue: expect.stringContaining('does not exist'),
      },
    ]);
  });
});
