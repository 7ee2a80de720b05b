import {
  EvaluationBudget,
  MAX_MATCHES_PER_FLAG,
  MAX_MATCH_INPUT_LENGTH,
  compileFlag,
  evaluate,
  type FlagDefinition,
} from '../../api/features/evaluation/engine';

/** A flag whose rules each test one `matches` condition on `ua`; none matches the hostile input below. */
function regexFlag(key: string, patterns: string[]): FlagDefinition {
  return {
    key,
    type: 'boolean',
    enabled: true,
    defaultValue: false,
    variants: [],
    targeting: patterns.map((pattern, i) => ({ id: `r${i}`, conditions: [{ property: 'ua', operator: 'matches', value: pattern }], value: true })),
  };
}

// Quadratic but accepted by the write-time checker: the most work one match may cost.
const HOSTILE_PATTERN = '.*foo.*';
const hostileInput = 'a'.repeat(MAX_MATCH_INPUT_LENGTH);

describe('input cap of matches', () => {
  it('is 1,024 characters: longer attributes never match', () => {
    expect(MAX_MATCH_INPUT_LENGTH).toBe(1024);
    const flag = compileFlag(regexFlag('f', ['a$']));
    expect(evaluate(flag, 'f', { ua: 'a'.repeat(1024) }, false).reason).toBe('TARGETING_MATCH');
    expect(evaluate(flag, 'f', { ua: 'a'.repeat(1025) }, false)).toMatchObject({ reason: 'DEFAULT', value: false });
  });
});

const clock = () => performance.now();

describe('EvaluationBudget', () => {
  it('takes condition charges while they fit, then stays exhausted', () => {
    const budget = new EvaluationBudget({ conditions: 10, regexMs: 1000 }, clock);
    expect(budget.charge(6)).toBe(true);
    expect(budget.charge(5)).toBe(false);
    expect(budget.exhausted).toBe(true);
    expect(budget.charge(1)).toBe(false);
    expect(budget.test(/a/, 'a')).toBe(false);
  });

  it('runs patterns until their time is spent', () => {
    let now = 0;
    const budget = new EvaluationBudget({ conditions: 10, regexMs: 5 }, () => now);
    const slow = { test: () => ((now += 3), true) } as unknown as RegExp;
    expect(budget.test(slow, 'x')).toBe(true);
    expect(budget.test(slow, 'x')).toBe(true);
    expect(budget.exhausted).toBe(false);
    expect(budget.test(slow, 'x')).toBe(false);
    expect(budget.exhausted).toBe(true);
  });

  it('leaves results unchanged while the request stays within it', () => {
    const flag = compileFlag(regexFlag('f', ['^Mozilla', 'Chrome/\\d+']));
    const budget = new EvaluationBudget({ conditions: 100, regexMs: 1000 }, clock);
    const result = evaluate(flag, 'f', { ua: 'Mozilla/5.0 Chrome/120' }, false, { budget });
    expect(result).toMatchObject({ reason: 'TARGETING_MATCH', value: true, ruleId: 'r0' });
    expect(budget.exhausted).toBe(false);
  });

  it('turns the flag that runs out of pattern time, and every later flag, into ERROR GENERAL with the request default', () => {
    const patterns = Array.from({ length: MAX_MATCHES_PER_FLAG }, () => HOSTILE_PATTERN);
    const flags = Array.from({ length: 50 }, (_, i) => compileFlag(regexFlag(`f${i}`, patterns)));
    const plain = compileFlag({ key: 'plain', type: 'boolean', enabled: true, defaultValue: true, variants: [], targeting: [] });
    // Each match of HOSTILE_PATTERN on the hostile input takes a fraction of a millisecond or
    // more; 50 flags of 20 are far beyond 5 ms whatever the machine.
    const budget = new EvaluationBudget({ conditions: 1_000_000, regexMs: 5 }, clock);
    const results = flags.map((flag) => evaluate(flag, flag.key, { ua: hostileInput }, 'fallback', { budget }));
    results.push(evaluate(plain, 'plain', {}, 'fallback', { budget }));
    const firstError = results.findIndex((r) => r.reason === 'ERROR');
    expect(firstError).toBeGreaterThanOrEqual(0);
    expect(firstError).toBeLessThan(45);
    expect(results.slice(0, firstError).every((r) => r.reason === 'DEFAULT' && r.value === false)).toBe(true);
    for (const r of results.slice(firstError)) {
      expect(r).toMatchObject({ reason: 'ERROR', value: 'fallback', errorCode: 'GENERAL' });
      expect(r.errorMessage).toMatch(/budget/);
    }
  });

  it('counts rule conditions, so thousands of cheap conditions are bounded as well', () => {
    const conditions = Array.from({ length: 50 }, (_, i) => ({ property: `p${i}`, operator: 'equals', value: 'x' }));
    const definition: FlagDefinition = {
      key: 'wide',
      type: 'boolean',
      enabled: true,
      defaultValue: false,
      variants: [],
      targeting: Array.from({ length: 200 }, (_, i) => ({ id: `r${i}`, conditions, value: true })),
    };
    const flag = compileFlag(definition);
    expect(flag.cost).toBe(1 + 200 * 50);
    const budget = new EvaluationBudget({ conditions: flag.cost * 3, regexMs: 1000 }, clock);
    const results = Array.from({ length: 10 }, () => evaluate(flag, 'wide', {}, false, { budget }));
    expect(results.slice(0, 3).every((r) => r.reason === 'DEFAULT')).toBe(true);
    expect(results.slice(3).every((r) => r.reason === 'ERROR' && r.errorCode === 'GENERAL')).toBe(true);
  });

  it('charges a contains search by the length it searches, one unit per 16 characters or elements', () => {
    const flag = compileFlag({
      key: 'c',
      type: 'boolean',
      enabled: true,
      defaultValue: false,
      variants: [],
      targeting: [{ id: 'r', conditions: [{ property: 'tags', operator: 'contains', value: 'absent' }], value: true }],
    });
    const context = { tags: Array.from({ length: 16_000 }, (_, i) => `t${i}`) };
    expect(evaluate(flag, 'c', context, false, { budget: new EvaluationBudget({ conditions: 1002, regexMs: 1000 }, clock) }).reason).toBe('DEFAULT');
    expect(evaluate(flag, 'c', context, false, { budget: new EvaluationBudget({ conditions: 1001, regexMs: 1000 }, clock) })).toMatchObject({
      reason: 'ERROR',
      errorCode: 'GENERAL',
    });
    expect(evaluate(flag, 'c', { tags: 'x'.repeat(160) }, false, { budget: new EvaluationBudget({ conditions: 12, regexMs: 1000 }, clock) })).toMatchObject({
      reason: 'DEFAULT',
    });
  });

  it('prices conditions by their work: date parsing, long prefixes and dotted paths cost more than a comparison', () => {
    const cost = (operator: string, value: unknown, property = 'p') =>
      compileFlag({ key: 'k', type: 'boolean', enabled: true, defaultValue: false, variants: [], targeting: [{ id: 'r', conditions: [{ property, operator, value }], value: true }] }).cost - 1;
    expect(cost('equals', 'x')).toBe(1);
    expect(cost('after', '2024-01-01')).toBeGreaterThanOrEqual(40);
    expect(cost('gt', '2024-01-01')).toBeGreaterThanOrEqual(40);
    expect(cost('gt', 10)).toBeLessThan(cost('gt', '2024-01-01'));
    expect(cost('starts_with', 'x'.repeat(400))).toBeGreaterThanOrEqual(100);
    expect(cost('equals', 'x', 'a.b.c')).toBeGreaterThan(cost('equals', 'x'));
  });
});
