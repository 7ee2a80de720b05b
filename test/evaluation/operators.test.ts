import fc from 'fast-check';
import {
  MAX_MATCH_INPUT_LENGTH,
  OPERATORS,
  checkRegexSafety,
  compareSemver,
  parseSemver,
  validateCondition,
  type Condition,
} from '../../api/features/evaluation/engine';
import { toComparableNumber } from '../../api/features/evaluation/engine/comparison';
import { parseIsoDate } from '../../api/features/evaluation/engine/dates';

const condition = (operator: string, value?: unknown): Condition => ({ property: 'attr', operator, value });

describe('OPERATORS', () => {
  it('lists the 18 documented operators and in_cohort', () => {
    expect(OPERATORS).toHaveLength(19);
    expect(new Set(OPERATORS).size).toBe(19);
    expect(OPERATORS).toContain('in_cohort');
  });
});

describe('validateCondition', () => {
  it.each<[string, unknown]>([
    ['equals', 'gold'],
    ['equals', 5],
    ['not_equals', false],
    ['in', ['a', 1, true]],
    ['in', []],
    ['not_in', ['x']],
    ['contains', 'ell'],
    ['contains', 3],
    ['starts_with', ''],
    ['ends_with', '@example.com'],
    ['matches', '^user-\\d+$'],
    ['gt', 10],
    ['gte', '10.5'],
    ['lt', '2024-01-01'],
    ['lte', '2024-01-01T12:00:00+02:00'],
    ['semver_eq', '1.2.3'],
    ['semver_gt', 'v2.0.0-rc.1+build.7'],
    ['semver_lt', '0.0.1'],
    ['before', '2024-01-01T00:00:00Z'],
    ['after', 1704067200000],
    ['exists', true],
    ['exists', false],
    ['exists', undefined],
    ['exists', null],
  ])('accepts %s %j', (operator, value) => {
    expect(validateCondition(condition(operator, value))).toBeNull();
  });

  it.each<[string, unknown, string]>([
    ['like', 'x', 'unknown operator "like"'],
    ['EQUALS', 'x', 'unknown operator'],
    ['equals', undefined, 'string, number or boolean'],
    ['equals', null, 'string, number or boolean'],
    ['equals', ['a'], 'string, number or boolean'],
    ['equals', { a: 1 }, 'string, number or boolean'],
    ['in', 'a,b', 'must be an array'],
    ['not_in', undefined, 'must be an array'],
    ['in', [{ a: 1 }], 'every item'],
    ['in', [null], 'every item'],
    ['contains', [1], 'string, number or boolean'],
    ['starts_with', 5, 'must be a string'],
    ['ends_with', null, 'must be a string'],
    ['matches', 5, 'regular expression string'],
    ['matches', '(', 'Invalid regular expression'],
    ['matches', '(a+)+$', 'nested repetition'],
    ['matches', 'a'.repeat(513), 'longer than 512'],
    ['gt', 'abc', 'number, a numeric string or an ISO 8601 date'],
    ['gte', true, 'number, a numeric string or an ISO 8601 date'],
    ['lt', null, 'number, a numeric string or an ISO 8601 date'],
    ['lte', '2024-02-30', 'number, a numeric string or an ISO 8601 date'],
    ['semver_eq', '1.2', 'semantic version'],
    ['semver_gt', '1.02.3', 'semantic version'],
    ['semver_lt', '1.0.0-01', 'semantic version'],
    ['semver_eq', 123, 'semantic version'],
    ['before', 'tomorrow', 'ISO 8601 date'],
    ['after', '2024/01/01', 'ISO 8601 date'],
    ['before', Number.NaN, 'ISO 8601 date'],
    ['exists', 'yes', 'true, false or absent'],
    ['exists', 1, 'true, false or absent'],
  ])('refuses %s %j', (operator, value, message) => {
    expect(validateCondition(condition(operator, value))).toContain(message);
  });

  it('needs a property', () => {
    expect(validateCondition({ property: '', operator: 'exists' })).toContain('property');
    expect(validateCondition({ operator: 'exists' } as unknown as Condition)).toContain('property');
    expect(validateCondition(null as unknown as Condition)).toContain('object');
  });
});

describe('numbers and dates', () => {
  it.each<[unknown, number]>([
    [42, 42],
    ['42', 42],
    ['-1.5e3', -1500],
    ['.5', 0.5],
    ['5.', 5],
    ['+7', 7],
  ])('reads %j as %p', (input, expected) => {
    expect(toComparableNumber(input)).toBe(expected);
  });

  it.each<unknown>(['', ' 1', '1 ', '0x10', 'Infinity', 'NaN', '1e999', Infinity, true, null, [1]])('does not read %j as a number', (input) => {
    expect(toComparableNumber(input)).toBeNaN();
  });

  it.each<[string, string]>([
    ['2024-01-01', '2024-01-01T00:00:00.000Z'],
    ['2024-01-01T10:20', '2024-01-01T10:20:00.000Z'],
    ['2024-01-01T10:20:30.123456Z', '2024-01-01T10:20:30.123Z'],
    ['2024-01-01 10:20:30+0130', '2024-01-01T08:50:30.000Z'],
    ['2024-01-01T00:00:00-05:00', '2024-01-01T05:00:00.000Z'],
    ['2024-02-29T23:59:59.9z', '2024-02-29T23:59:59.900Z'],
    ['0001-01-01', '0001-01-01T00:00:00.000Z'],
  ])('reads %s as %s', (input, iso) => {
    expect(new Date(parseIsoDate(input)).toISOString()).toBe(iso);
  });

  it.each(['2023-02-29', '2024-13-01', '2024-00-10', '2024-01-01T24:00', '2024-01-01T10:60', '24-01-01', '2024-1-1', 'Jan 1 2024'])(
    'does not read %s as a date',
    (input) => {
      expect(parseIsoDate(input)).toBeNaN();
    },
  );
});

describe('semantic versions', () => {
  const ordered = [
    '0.0.1',
    '0.9.0',
    '1.0.0-0',
    '1.0.0-2',
    '1.0.0-10',
    '1.0.0-alpha',
    '1.0.0-alpha.1',
    '1.0.0-alpha.beta',
    '1.0.0-beta',
    '1.0.0-beta.2',
    '1.0.0-beta.11',
    '1.0.0-rc.1',
    '1.0.0',
    '1.2.0',
    '1.10.0',
    '2.0.0',
    '18446744073709551616.0.0',
  ];

  it('orders by Semantic Versioning 2.0.0 precedence', () => {
    for (let i = 0; i < ordered.length; i++) {
      for (let j = 0; j < ordered.length; j++) {
        const order = compareSemver(parseSemver(ordered[i])!, parseSemver(ordered[j])!);
        expect(Math.sign(order)).toBe(Math.sign(i - j));
      }
    }
  });

  it('ignores build metadata and a leading v', () => {
    expect(compareSemver(parseSemver('v1.2.3+build.1')!, parseSemver('1.2.3+exp.sha.5114f85')!)).toBe(0);
  });

  it.each(['1.2', '1', '1.2.3.4', '01.2.3', '1.02.3', '1.2.03', '1.2.3-', '1.2.3-01', '1.2.3+', 'V1.2.3', ' 1.2.3', '1.2.3-a..b', ''])(
    'refuses %j',
    (text) => {
      expect(parseSemver(text)).toBeUndefined();
    },
  );

  it('accepts what the grammar allows', () => {
    expect(parseSemver('1.0.0-x-y-z.--')).toEqual({ major: '1', minor: '0', patch: '0', prerelease: ['x-y-z', '--'] });
    expect(parseSemver('1.0.0-0A.is.legal')?.prerelease).toEqual(['0A', 'is', 'legal']);
  });
});

describe('regular-expression safety', () => {
  it.each([
    ['(a+)+$', 'nested repetition'],
    ['(a*)*$', 'nested repetition'],
    ['(.*a){20}', 'nested repetition'],
    ['^(\\w+\\s?)*$', 'nested repetition'],
    ['^([a-zA-Z0-9])(([\\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$', 'nested repetition'],
    ['(a|a)*$', 'repeated alternation'],
    ['(a|aa)+$', 'repeated alternation'],
    ['(?:[ab]|b)*', 'repeated alternation'],
    ['\\d+\\d+x', 'backtrack catastrophically'],
    ['.*a.*b', 'backtrack catastrophically'],
    ['^.*a.*b.*c$', 'backtrack catastrophically'],
    ['.*a{16}$', 'backtrack catastrophically'],
    ['^a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?a?aaaaaaaaaaaaaaaaaaaaaaaa$', 'backtrack catastrophically'],
    ['^(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)(?:a|a)x', 'backtrack catastrophically'],
    ['(a)\\1', 'backreferences'],
    ['(?<n>a)\\k<n>', 'backreferences'],
    ['a(?=b)', 'lookahead'],
    ['a(?!b)', 'lookahead'],
    ['(?<=a)b', 'lookbehind'],
    ['(?<!a)b', 'lookbehind'],
    ['\\01', 'octal'],
  ])('refuses %s', (pattern, message) => {
    expect(checkRegexSafety(pattern)).toContain(message);
  });

  it.each([
    '^user-\\d+$',
    '@example\\.com$',
    '^(foo|bar)-\\d+$',
    '(?:iPhone|iPad|iPod)',
    'Chrome/\\d+',
    '.*foo.*',
    'foo.*bar',
    '^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$',
    '\\w+@\\w+\\.\\w+',
    '^v?\\d+\\.\\d+\\.\\d+$',
    '^\\d+(\\.\\d+)*$',
    '^(?:\\w+,)*\\w+$',
    '^(?:ab)+$',
    '(a|b)*c',
    '^(?:https?|ftp)://[^/]+/',
    '^Mozilla/5\\.0 \\(.*\\) Chrome/\\d+',
    '(?:^|,)beta(?:,|$)',
    '^\\+?[0-9 ()-]{7,20}$',
    '^[A-Z]{2}$',
    '(?<country>[A-Z]{2})-\\d{4}',
    '[\\u00e9\\x41-\\x5a\\cJ\\b]',
    '',
  ])('accepts %s', (pattern) => {
    expect(checkRegexSafety(pattern)).toBeNull();
  });

  // Generated patterns over {a, b}: whatever the checker accepts must stay fast on the
  // inputs that make backtracking engines explode (long runs with a failing end).
  it('accepted patterns run in bounded time on adversarial inputs', () => {
    const n = MAX_MATCH_INPUT_LENGTH;
    const inputs = ['a'.repeat(n), 'a'.repeat(n - 1) + '!', 'ab'.repeat(n / 2), 'aab'.repeat(Math.floor(n / 3)) + '!', 'b'.repeat(n - 1) + 'a'];
    const atom = fc.constantFrom('a', 'b', '.', '[ab]', '\\w', '[^b]');
    const quantifier = fc.constantFrom('', '', '*', '+', '?', '{2}', '{1,3}', '{2,}', '{4}');
    const term = fc.oneof(
      { weight: 3, arbitrary: fc.tuple(atom, quantifier).map(([a, q]) => a + q) },
      fc.tuple(fc.array(atom, { minLength: 1, maxLength: 3 }), fc.array(atom, { minLength: 1, maxLength: 3 }), quantifier)
        .map(([left, right, q]) => `(?:${left.join('')}|${right.join('')})${q}`),
      fc.tuple(fc.array(fc.tuple(atom, quantifier).map(([a, q]) => a + q), { minLength: 1, maxLength: 3 }), quantifier)
        .map(([body, q]) => `(${body.join('')})${q}`),
    );
    const pattern = fc
      .tuple(fc.boolean(), fc.array(term, { minLength: 1, maxLength: 5 }), fc.constantFrom('', '$', '!'))
      .map(([anchored, terms, end]) => (anchored ? '^' : '') + terms.join('') + end);
    let accepted = 0;
    fc.assert(
      fc.property(pattern, (source) => {
        if (checkRegexSafety(source) !== null) return;
        accepted++;
        const regex = new RegExp(source);
        for (const input of inputs) {
          const started = process.hrtime.bigint();
          regex.test(input);
          const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
          expect({ source, input: input.slice(0, 8), fast: elapsedMs < 1000 }).toEqual({ source, input: input.slice(0, 8), fast: true });
        }
      }),
      { seed: 7, numRuns: 1500 },
    );
    expect(accepted).toBeGreaterThan(50);
  });
});
