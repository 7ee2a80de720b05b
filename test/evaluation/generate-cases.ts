/**
 * Writes test/evaluation/cases.json, the language-neutral evaluation cases.
 * Run: npx tsx test/evaluation/generate-cases.ts
 *
 * cases.json is the source of truth and is committed; this script only saves typing. Every
 * expectation below is written by hand except the rollout and variant cases, whose buckets
 * come from the engine's `bucket` and were checked against an independent MurmurHash3
 * (Python's mmh3) when the file was generated. Regenerating must leave cases.json unchanged
 * unless a case was deliberately added or changed: review the diff.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROLLOUT_SALT, VARIANT_SALT, bucket } from '../../api/features/evaluation/engine';

interface Expected {
  value: unknown;
  reason: string;
  variant?: string;
  errorCode?: string;
}

interface Case {
  name: string;
  flagKey: string;
  flag: Record<string, unknown> | null;
  context: unknown;
  defaultValue: unknown;
  expectedType?: string;
  expected: Expected;
}

const cases: Case[] = [];
const MISSING = Symbol('missing attribute');
const REQUEST_DEFAULT = 'request-default';

function flag(key: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { key, type: 'string', enabled: true, defaultValue: 'off', variants: [], targeting: [], ...fields };
}

function add(entry: Omit<Case, 'flagKey'> & { flagKey?: string }): void {
  const flagKey = entry.flagKey ?? (entry.flag === null ? 'missing-flag' : String(entry.flag.key));
  cases.push({ ...entry, flagKey });
}

const matched = (value: unknown = 'on'): Expected => ({ value, reason: 'TARGETING_MATCH' });
const fellThrough = (value: unknown = 'off'): Expected => ({ value, reason: 'DEFAULT' });
const failed = (errorCode: string, value: unknown = REQUEST_DEFAULT): Expected => ({ value, reason: 'ERROR', errorCode });

// ---------------------------------------------------------------------------------------------
// Operators: one rule with one condition on `attr`; [operand, attribute, matches, note].

type OperatorRow = [operand: unknown, attribute: unknown, matches: boolean, note: string];

function operatorCases(operator: string, rows: OperatorRow[]): void {
  for (const [operand, attribute, matches, note] of rows) {
    const condition = operand === MISSING ? { property: 'attr', operator } : { property: 'attr', operator, value: operand };
    add({
      name: `${operator}: ${note}`,
      flag: flag(`op-${operator}`, { targeting: [{ id: 'rule-1', conditions: [condition], value: 'on' }] }),
      context: attribute === MISSING ? { targetingKey: 'user-1' } : { targetingKey: 'user-1', attr: attribute },
      defaultValue: REQUEST_DEFAULT,
      expected: matches ? matched() : fellThrough(),
    });
  }
}

operatorCases('equals', [
  ['gold', 'gold', true, 'same string'],
  ['gold', 'Gold', false, 'case differs'],
  ['gold', 'gold ', false, 'trailing blank'],
  ['gold', MISSING, false, 'missing attribute'],
  ['gold', null, false, 'null attribute'],
  ['gold', 5, false, 'number attribute against string'],
  ['gold', ['gold'], false, 'array attribute is not comparable'],
  ['gold', { plan: 'gold' }, false, 'object attribute is not comparable'],
  ['', '', true, 'empty strings'],
  [5, 5, true, 'same number'],
  [5, '5', false, 'numeric string is not the number'],
  [5, 6, false, 'other number'],
  [0.5, 0.5, true, 'fraction'],
  [0, false, false, 'zero is not false'],
  [true, true, true, 'same boolean'],
  [true, 'true', false, 'string true is not boolean true'],
  [true, false, false, 'other boolean'],
  [true, 1, false, 'one is not true'],
]);

operatorCases('not_equals', [
  ['gold', 'silver', true, 'different string'],
  ['gold', 'gold', false, 'same string'],
  ['gold', 'GOLD', true, 'case differs'],
  ['gold', MISSING, false, 'missing attribute is no match'],
  ['gold', null, false, 'null attribute is no match'],
  ['gold', 5, true, 'number differs from string'],
  ['gold', false, true, 'boolean differs from string'],
  ['gold', ['silver'], false, 'array attribute is not comparable'],
  ['gold', {}, false, 'object attribute is not comparable'],
  [5, '5', true, 'numeric string differs from number'],
  [5, 5, false, 'same number'],
  [false, false, false, 'same boolean'],
  [false, true, true, 'other boolean'],
]);

const MEMBERS = ['a', 'b', 3, true];
operatorCases('in', [
  [MEMBERS, 'a', true, 'string member'],
  [MEMBERS, 'c', false, 'string not a member'],
  [MEMBERS, 3, true, 'number member'],
  [MEMBERS, '3', false, 'numeric string is not the number member'],
  [MEMBERS, true, true, 'boolean member'],
  [MEMBERS, 'true', false, 'string true is not the boolean member'],
  [MEMBERS, 'A', false, 'case-sensitive'],
  [MEMBERS, MISSING, false, 'missing attribute'],
  [MEMBERS, null, false, 'null attribute'],
  [MEMBERS, ['a'], false, 'array attribute is not comparable'],
  [MEMBERS, { a: 1 }, false, 'object attribute is not comparable'],
  [[], 'a', false, 'empty list holds nothing'],
  [['x'], 'x', true, 'single member'],
]);

operatorCases('not_in', [
  [MEMBERS, 'c', true, 'string not a member'],
  [MEMBERS, 'a', false, 'string member'],
  [MEMBERS, '3', true, 'numeric string is not the number member'],
  [MEMBERS, 3, false, 'number member'],
  [MEMBERS, false, true, 'other boolean'],
  [MEMBERS, MISSING, false, 'missing attribute is no match'],
  [MEMBERS, null, false, 'null attribute is no match'],
  [MEMBERS, ['c'], false, 'array attribute is not comparable'],
  [[], 'a', true, 'empty list excludes nothing'],
]);

operatorCases('contains', [
  ['ell', 'hello', true, 'substring'],
  ['ell', 'HELLO', false, 'case-sensitive'],
  ['ell', 'he', false, 'not a substring'],
  ['hello', 'hello', true, 'whole string'],
  ['', 'abc', true, 'empty substring'],
  ['ell', MISSING, false, 'missing attribute'],
  ['ell', null, false, 'null attribute'],
  ['ell', 5, false, 'number attribute'],
  ['beta', ['alpha', 'beta'], true, 'array membership'],
  ['bet', ['alpha', 'beta'], false, 'array membership is exact'],
  ['beta', [], false, 'empty array'],
  [5, [1, 5], true, 'number in array'],
  [5, ['5'], false, 'array membership is type-strict'],
  [5, '555', false, 'number operand on string attribute'],
  [true, [false, true], true, 'boolean in array'],
  ['x', { x: 1 }, false, 'object attribute'],
]);

operatorCases('starts_with', [
  ['user-', 'user-42', true, 'prefix'],
  ['user-', 'user-', true, 'equal'],
  ['user-', 'USER-42', false, 'case-sensitive'],
  ['user-', 'a user-42', false, 'not at the start'],
  ['', 'x', true, 'empty prefix'],
  ['user-', MISSING, false, 'missing attribute'],
  ['4', 42, false, 'number attribute'],
  ['user-', ['user-1'], false, 'array attribute'],
]);

operatorCases('ends_with', [
  ['@example.com', 'ann@example.com', true, 'suffix'],
  ['@example.com', 'ann@example.com.evil.io', false, 'not at the end'],
  ['@example.com', 'ANN@EXAMPLE.COM', false, 'case-sensitive'],
  ['@example.com', MISSING, false, 'missing attribute'],
  ['@example.com', null, false, 'null attribute'],
  ['7', 7, false, 'number attribute'],
]);

operatorCases('matches', [
  ['^user-\\d+$', 'user-12', true, 'anchored digits'],
  ['^user-\\d+$', 'user-', false, 'needs a digit'],
  ['^user-\\d+$', 'xuser-12', false, 'anchored at the start'],
  ['^user-\\d+$', 'user-12\n', false, '$ is the end of input'],
  ['example\\.com$', 'ann@example.com', true, 'unanchored search'],
  ['example\\.com$', 'ann@exampleXcom', false, 'escaped dot'],
  ['(?:iPhone|iPad)', 'Mozilla/5.0 (iPad; CPU OS 17_0)', true, 'alternation'],
  ['abc', 'ABC', false, 'case-sensitive, no flags'],
  ['^\\d+(\\.\\d+)*$', '10.4.2', true, 'delimited repetition'],
  ['^$', '', true, 'empty attribute'],
  ['^user-\\d+$', MISSING, false, 'missing attribute'],
  ['^1', 12, false, 'number attribute'],
  ['user', ['user-1'], false, 'array attribute'],
  ['a$', 'a'.repeat(1024), true, 'attribute of 1024 characters is tested'],
  ['a$', 'a'.repeat(1025), false, 'attribute over 1024 characters never matches'],
  ['(a+)+$', 'aaa', false, 'catastrophic pattern in stored data never matches'],
  ['(a)\\1', 'aa', false, 'backreference in stored data never matches'],
  ['[', '[', false, 'invalid pattern in stored data never matches'],
  [42, '42', false, 'non-string pattern in stored data never matches'],
]);

operatorCases('gt', [
  [10, 11, true, 'greater number'],
  [10, 10, false, 'equal number'],
  [10, 9, false, 'smaller number'],
  [10, '11', true, 'numeric string attribute'],
  [10, '10.5', true, 'decimal string attribute'],
  [99, '1e2', true, 'exponent string attribute'],
  [10, '-11', false, 'negative string attribute'],
  [10, 'abc', false, 'non-numeric string'],
  [10, '', false, 'empty string'],
  [10, ' 11', false, 'blanks are not numeric'],
  [10, '0x10', false, 'hex is not numeric'],
  [10, true, false, 'boolean attribute'],
  [10, [11], false, 'array attribute'],
  [10, MISSING, false, 'missing attribute'],
  [10, null, false, 'null attribute'],
  ['10', 11, true, 'numeric string operand'],
  [1.5, 1.6, true, 'fractions'],
  [-1, 0, true, 'negative operand'],
  ['2024-01-01T00:00:00Z', '2024-06-01', true, 'date operand, later date attribute'],
  ['2024-01-01T00:00:00Z', '2023-12-31', false, 'date operand, earlier date attribute'],
  ['2024-01-01T00:00:00Z', 1717200000000, true, 'date operand, epoch attribute'],
  ['2024-01-01T00:00:00Z', 'soon', false, 'date operand, non-date attribute'],
]);

operatorCases('gte', [
  [10, 10, true, 'equal number'],
  [10, 10.001, true, 'greater number'],
  [10, 9.999, false, 'smaller number'],
  [10, '10', true, 'equal numeric string'],
  [10, MISSING, false, 'missing attribute'],
  ['2024-01-01', '2024-01-01T00:00:00Z', true, 'equal dates'],
]);

operatorCases('lt', [
  [10, 9, true, 'smaller number'],
  [10, 10, false, 'equal number'],
  [10, '-5', true, 'negative string'],
  [10, 'x', false, 'non-numeric string'],
  [10, MISSING, false, 'missing attribute'],
  [0, -0.5, true, 'below zero'],
  ['2024-01-01', '2023-12-31T23:59:59Z', true, 'earlier date'],
  ['2024-01-01', 1704067200000, false, 'equal epoch'],
]);

operatorCases('lte', [
  [10, 10, true, 'equal number'],
  [10, 10.0001, false, 'greater number'],
  [10, '9', true, 'smaller numeric string'],
  [10, false, false, 'boolean attribute'],
  [10, null, false, 'null attribute'],
]);

operatorCases('semver_eq', [
  ['1.2.3', '1.2.3', true, 'same version'],
  ['1.2.3', 'v1.2.3', true, 'leading v'],
  ['v1.2.3', '1.2.3', true, 'leading v on the operand'],
  ['1.2.3', '1.2.3+build.5', true, 'build metadata ignored'],
  ['1.2.3+a', '1.2.3+b', true, 'different build metadata'],
  ['1.2.3', '1.2.3-beta', false, 'prerelease differs'],
  ['1.2.3-beta.1', '1.2.3-beta.1', true, 'same prerelease'],
  ['1.2.3', '1.2', false, 'partial version is not a version'],
  ['1.2.3', '1.2.4', false, 'other patch'],
  ['1.2.3', '01.2.3', false, 'leading zero is invalid'],
  ['1.2.3', 123, false, 'number attribute'],
  ['1.2.3', MISSING, false, 'missing attribute'],
  ['1.2.3', ' 1.2.3', false, 'blanks are invalid'],
  ['1.2', '1.2.0', false, 'invalid operand in stored data never matches'],
]);

operatorCases('semver_gt', [
  ['1.2.3', '1.2.4', true, 'greater patch'],
  ['1.2.3', '1.3.0', true, 'greater minor'],
  ['1.2.3', '2.0.0', true, 'greater major'],
  ['1.2.3', '1.10.0', true, 'numeric, not lexical, order'],
  ['1.2.3', '1.2.3', false, 'equal'],
  ['1.2.3', '1.2.2', false, 'smaller'],
  ['1.2.3', '1.2.3-rc.1', false, 'prerelease ranks below the release'],
  ['1.2.3', '1.2.4-alpha', true, 'prerelease of a greater version'],
  ['1.2.3-rc.1', '1.2.3', true, 'release above its prerelease'],
  ['1.2.3', 'garbage', false, 'not a version'],
  ['1.2.3', MISSING, false, 'missing attribute'],
  ['99999999999999999999.0.0', '100000000000000000000.0.0', true, 'numbers beyond 2^53 compare exactly'],
]);

// Semantic Versioning 2.0.0, section 11: each is lower than the next.
const PRECEDENCE = [
  '1.0.0-alpha',
  '1.0.0-alpha.1',
  '1.0.0-alpha.beta',
  '1.0.0-beta',
  '1.0.0-beta.2',
  '1.0.0-beta.11',
  '1.0.0-rc.1',
  '1.0.0',
  '2.0.0',
  '2.1.0',
  '2.1.1',
];
const precedenceRows: OperatorRow[] = [];
for (let i = 0; i + 1 < PRECEDENCE.length; i++) {
  precedenceRows.push([PRECEDENCE[i + 1], PRECEDENCE[i], true, `${PRECEDENCE[i]} < ${PRECEDENCE[i + 1]}`]);
  precedenceRows.push([PRECEDENCE[i], PRECEDENCE[i + 1], false, `${PRECEDENCE[i + 1]} is not < ${PRECEDENCE[i]}`]);
}
operatorCases('semver_lt', [
  ...precedenceRows,
  ['1.0.0', '1.0.0', false, 'equal'],
  ['1.0.0', '0.9.9', true, 'smaller major'],
  ['1.0.0', '1.0.0-0', true, 'numeric prerelease'],
  ['1.0.0-2', '1.0.0-10', false, 'numeric prerelease identifiers compare as numbers'],
  ['1.0.0-a', '1.0.0-1', true, 'numeric identifiers rank below alphanumeric ones'],
  ['1.0.0-alpha.01', '0.1.0', false, 'invalid operand (leading zero) in stored data never matches'],
  ['1.0.0', null, false, 'null attribute'],
]);

operatorCases('before', [
  ['2024-01-01T00:00:00Z', '2023-12-31T23:59:59Z', true, 'one second earlier'],
  ['2024-01-01T00:00:00Z', '2024-01-01T00:00:00Z', false, 'same instant is not before'],
  ['2024-01-01T00:00:00Z', '2024-01-01T01:00:00+02:00', true, 'offset converts to 23:00 UTC'],
  ['2024-01-01T00:00:00Z', '2024-01-01T00:00:00.000-00:30', false, 'negative offset is later'],
  ['2024-01-01T00:00:00Z', '2023-12-31', true, 'date alone is UTC midnight'],
  ['2024-01-01T00:00:00Z', '2024-01-01T00:00:00', false, 'time without offset is UTC'],
  ['2024-01-01T00:00:00Z', 1704067199999, true, 'epoch one millisecond earlier'],
  ['2024-01-01T00:00:00Z', 1704067200000, false, 'epoch same instant'],
  ['2024-01-01T00:00:00Z', '1704067199999', false, 'epoch as a string is not a date'],
  ['2024-01-01T00:00:00Z', 'yesterday', false, 'not a date'],
  ['2024-01-01T00:00:00Z', '2023-02-30', false, 'impossible date'],
  ['2024-01-01T00:00:00Z', '2023-13-01', false, 'impossible month'],
  ['2024-01-01T00:00:00Z', MISSING, false, 'missing attribute'],
  ['2024-01-01T00:00:00Z', true, false, 'boolean attribute'],
  [1704067200000, '2023-12-31T12:00:00.5Z', true, 'epoch operand, fractional seconds'],
  ['2024-02-29', '2024-02-28T23:59:59.999Z', true, 'leap day operand'],
  ['next week', '2020-01-01', false, 'invalid operand in stored data never matches'],
]);

operatorCases('after', [
  ['2024-01-01', '2024-01-01T00:00:01Z', true, 'one second later'],
  ['2024-01-01', '2024-01-01', false, 'same instant is not after'],
  ['2024-01-01', '2023-12-31T23:00:00-02:00', true, 'offset converts to 01:00 UTC'],
  ['2024-01-01', '2024-01-01T00:00:00.001Z', true, 'one millisecond later'],
  ['2024-01-01', 1704067200001, true, 'epoch later'],
  ['2024-01-01', 'tomorrow', false, 'not a date'],
  ['2024-01-01', MISSING, false, 'missing attribute'],
  ['2024-01-01', null, false, 'null attribute'],
  ['2024-01-01', ['2025-01-01'], false, 'array attribute'],
]);

operatorCases('exists', [
  [true, 'x', true, 'present string'],
  [true, '', true, 'empty string is present'],
  [true, 0, true, 'zero is present'],
  [true, false, true, 'false is present'],
  [true, [], true, 'empty array is present'],
  [true, {}, true, 'empty object is present'],
  [true, MISSING, false, 'absent'],
  [true, null, false, 'null counts as absent'],
  [MISSING, 'x', true, 'no operand means present'],
  [MISSING, MISSING, false, 'no operand, absent'],
  [null, 'x', true, 'null operand means present'],
  [false, MISSING, true, 'false operand, absent'],
  [false, null, true, 'false operand, null'],
  [false, 'x', false, 'false operand, present'],
  [false, 0, false, 'false operand, zero is present'],
  ['yes', 'x', false, 'invalid operand in stored data never matches'],
]);

operatorCases('regex_match', [['x', 'x', false, 'unknown operator in stored data never matches']]);

// ---------------------------------------------------------------------------------------------
// Attribute lookup

function lookupCase(name: string, property: string, operator: string, value: unknown, context: unknown, matches: boolean): void {
  add({
    name: `lookup: ${name}`,
    flag: flag('lookup', { targeting: [{ id: 'rule-1', conditions: [{ property, operator, value }], value: 'on' }] }),
    context,
    defaultValue: REQUEST_DEFAULT,
    expected: matches ? matched() : fellThrough(),
  });
}

lookupCase('dotted path into nested objects', 'user.plan', 'equals', 'pro', { user: { plan: 'pro' } }, true);
lookupCase('deeper path', 'org.billing.tier', 'equals', 2, { org: { billing: { tier: 2 } } }, true);
lookupCase('exact dotted key wins', 'user.plan', 'equals', 'pro', { 'user.plan': 'pro', user: { plan: 'free' } }, true);
lookupCase('path through null', 'user.plan', 'exists', true, { user: null }, false);
lookupCase('path through a string', 'user.plan', 'exists', true, { user: 'pro' }, false);
lookupCase('path missing a segment', 'user.plan', 'exists', false, { user: {} }, true);
lookupCase('inherited constructor is not an attribute', 'constructor', 'exists', true, {}, false);
lookupCase('inherited toString is not an attribute', 'toString', 'exists', true, { targetingKey: 'k' }, false);
lookupCase('__proto__ is not an attribute', '__proto__', 'exists', true, {}, false);
lookupCase('inherited path segment', 'user.constructor', 'exists', true, { user: {} }, false);
lookupCase('targetingKey is an attribute', 'targetingKey', 'starts_with', 'user-', { targetingKey: 'user-9' }, true);
lookupCase('property names are case-sensitive', 'Plan', 'equals', 'pro', { plan: 'pro' }, false);

// ---------------------------------------------------------------------------------------------
// Rules

const planRule = (id: string, plan: string, value: unknown) => ({
  id,
  conditions: [{ property: 'plan', operator: 'equals', value: plan }],
  value,
});

add({
  name: 'rules: first matching rule wins when both match',
  flag: flag('rules', { targeting: [planRule('r1', 'pro', 'first'), planRule('r2', 'pro', 'second')] }),
  context: { targetingKey: 'u', plan: 'pro' },
  defaultValue: REQUEST_DEFAULT,
  expected: matched('first'),
});
add({
  name: 'rules: second rule when the first does not match',
  flag: flag('rules', { targeting: [planRule('r1', 'free', 'first'), planRule('r2', 'pro', 'second')] }),
  context: { targetingKey: 'u', plan: 'pro' },
  defaultValue: REQUEST_DEFAULT,
  expected: matched('second'),
});
add({
  name: 'rules: no rule matches',
  flag: flag('rules', { targeting: [planRule('r1', 'free', 'first'), planRule('r2', 'team', 'second')] }),
  context: { targetingKey: 'u', plan: 'pro' },
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough(),
});
const countryAndPlan = {
  id: 'both',
  conditions: [
    { property: 'country', operator: 'in', value: ['FR', 'DE'] },
    { property: 'plan', operator: 'equals', value: 'pro' },
  ],
  value: 'eu-pro',
};
for (const [context, matches, note] of [
  [{ country: 'FR', plan: 'pro' }, true, 'all conditions hold'],
  [{ country: 'US', plan: 'pro' }, false, 'first condition fails'],
  [{ country: 'DE', plan: 'free' }, false, 'second condition fails'],
  [{ plan: 'pro' }, false, 'one attribute missing'],
] as const) {
  add({
    name: `rules: conditions are ANDed, ${note}`,
    flag: flag('rules-and', { targeting: [countryAndPlan] }),
    context,
    defaultValue: REQUEST_DEFAULT,
    expected: matches ? matched('eu-pro') : fellThrough(),
  });
}
add({
  name: 'rules: a rule without conditions matches everyone',
  flag: flag('rules-empty', { targeting: [{ id: 'all', conditions: [], value: 'everyone' }] }),
  context: {},
  defaultValue: REQUEST_DEFAULT,
  expected: matched('everyone'),
});
add({
  name: 'rules: an unusable rule is skipped, the next one applies',
  flag: flag('rules-bad', {
    targeting: [
      { id: 'bad', conditions: [{ property: 'plan', operator: 'like', value: 'pro' }], value: 'bad' },
      planRule('good', 'pro', 'good'),
    ],
  }),
  context: { plan: 'pro' },
  defaultValue: REQUEST_DEFAULT,
  expected: matched('good'),
});
add({
  name: 'rules: one bad condition makes the whole rule unusable',
  flag: flag('rules-bad', {
    targeting: [
      {
        id: 'half-bad',
        conditions: [
          { property: 'plan', operator: 'equals', value: 'pro' },
          { property: 'age', operator: 'gt', value: 'old' },
        ],
        value: 'bad',
      },
    ],
  }),
  context: { plan: 'pro', age: 40 },
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough(),
});
for (const [rule, note] of [
  [null, 'null rule'],
  ['rule', 'string rule'],
  [{ id: 'no-conditions', value: 'x' }, 'rule without conditions array'],
  [{ id: 'bad-conditions', conditions: {}, value: 'x' }, 'conditions not an array'],
  [{ id: 'bad-rollout', conditions: [], value: 'x', rolloutPercentage: '50' }, 'rollout given as a string'],
  [{ id: 'null-condition', conditions: [null], value: 'x' }, 'null condition'],
  [{ id: 'no-property', conditions: [{ operator: 'exists' }], value: 'x' }, 'condition without property'],
] as const) {
  add({
    name: `rules: stored ${note} never matches and does not break evaluation`,
    flag: flag('rules-malformed', { targeting: [rule, planRule('good', 'pro', 'good')] }),
    context: { targetingKey: 'u', plan: 'pro' },
    defaultValue: REQUEST_DEFAULT,
    expected: matched('good'),
  });
}
add({
  name: 'rules: targeting that is not an array is ignored',
  flag: flag('rules-malformed', { targeting: { id: 'r' } }),
  context: { plan: 'pro' },
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough(),
});
add({
  name: 'rules: a matching rule wins over variants',
  flag: flag('rules-variants', {
    targeting: [planRule('r1', 'pro', 'rule-value')],
    variants: [{ name: 'a', value: 'variant-a', weight: 1 }],
  }),
  context: { targetingKey: 'u', plan: 'pro' },
  defaultValue: REQUEST_DEFAULT,
  expected: matched('rule-value'),
});

// Rule values of every type.
const typedRuleValues: [string, unknown, unknown][] = [
  ['boolean', true, false],
  ['boolean', false, true],
  ['string', 'blue', 'grey'],
  ['string', '', 'grey'],
  ['number', 42, 0],
  ['number', -1.25, 0],
  ['number', 0, 1],
  ['object', { color: 'blue', sizes: [1, 2] }, {}],
  ['object', [1, 'two', null], []],
  ['object', {}, { a: 1 }],
];
for (const [type, value, defaultValue] of typedRuleValues) {
  add({
    name: `rule value: ${type} ${JSON.stringify(value)}`,
    flag: flag(`typed-${type}`, { type, defaultValue, targeting: [{ id: 'r', conditions: [], value }] }),
    context: { targetingKey: 'u' },
    defaultValue,
    expected: matched(value),
  });
}

// ---------------------------------------------------------------------------------------------
// Missing, disabled, default, invalid context

for (const defaultValue of [false, 'fallback', 7, { a: 1 }, null]) {
  add({
    name: `missing flag returns the request default ${JSON.stringify(defaultValue)}`,
    flag: null,
    context: { targetingKey: 'u' },
    defaultValue,
    expected: failed('FLAG_NOT_FOUND', defaultValue),
  });
}
add({
  name: 'missing flag wins over an invalid context',
  flag: null,
  context: null,
  defaultValue: 'fallback',
  expected: failed('FLAG_NOT_FOUND', 'fallback'),
});

const alwaysOn = [{ id: 'all', conditions: [], value: 'on' }];
for (const [type, defaultValue, requestDefault] of [
  ['boolean', false, true],
  ['string', 'off', 'req'],
  ['number', 3, 9],
  ['object', { mode: 'off' }, {}],
] as const) {
  add({
    name: `disabled ${type} flag returns its own default, reason DEFAULT`,
    flag: flag(`disabled-${type}`, { type, enabled: false, defaultValue, targeting: type === 'string' ? alwaysOn : [] }),
    context: { targetingKey: 'u' },
    defaultValue: requestDefault,
    expected: fellThrough(defaultValue),
  });
  add({
    name: `enabled ${type} flag without rules or variants returns its default`,
    flag: flag(`plain-${type}`, { type, defaultValue }),
    context: { targetingKey: 'u' },
    defaultValue: requestDefault,
    expected: fellThrough(defaultValue),
  });
}
add({
  name: 'disabled flag ignores matching rules and variants',
  flag: flag('disabled-all', {
    enabled: false,
    targeting: alwaysOn,
    variants: [{ name: 'a', value: 'variant', weight: 1 }],
  }),
  context: { targetingKey: 'u' },
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough('off'),
});
add({
  name: 'disabled flag does not need a valid context',
  flag: flag('disabled-context', { enabled: false }),
  context: null,
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough('off'),
});
add({
  name: 'enabled flag stored as a string is disabled',
  flag: flag('enabled-string', { enabled: 'true', targeting: alwaysOn }),
  context: {},
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough('off'),
});
for (const [context, note] of [
  [null, 'null'],
  [[], 'an array'],
  ['user-1', 'a string'],
  [42, 'a number'],
] as const) {
  add({
    name: `context that is ${note} is INVALID_CONTEXT`,
    flag: flag('context-check', { targeting: alwaysOn }),
    context,
    defaultValue: REQUEST_DEFAULT,
    expected: failed('INVALID_CONTEXT'),
  });
}
add({
  name: 'empty context evaluates',
  flag: flag('context-check', { targeting: alwaysOn }),
  context: {},
  defaultValue: REQUEST_DEFAULT,
  expected: matched('on'),
});

// ---------------------------------------------------------------------------------------------
// Type checks

const wrongValues: Record<string, unknown[]> = {
  boolean: ['true', 1, null, {}],
  string: [5, true, null, ['a']],
  number: ['5', true, null, [5]],
  object: ['{}', 1, null, false],
};
for (const [type, values] of Object.entries(wrongValues)) {
  for (const value of values) {
    add({
      name: `type mismatch: ${type} flag with default ${JSON.stringify(value)}`,
      flag: flag(`mismatch-${type}`, { type, defaultValue: value }),
      context: { targetingKey: 'u' },
      defaultValue: REQUEST_DEFAULT,
      expected: failed('TYPE_MISMATCH'),
    });
  }
  add({
    name: `type mismatch: ${type} flag with rule value ${JSON.stringify(values[0])}`,
    flag: flag(`mismatch-rule-${type}`, { type, defaultValue: null, targeting: [{ id: 'r', conditions: [], value: values[0] }] }),
    context: { targetingKey: 'u' },
    defaultValue: REQUEST_DEFAULT,
    expected: failed('TYPE_MISMATCH'),
  });
  add({
    name: `type mismatch: disabled ${type} flag with a default of another type`,
    flag: flag(`mismatch-disabled-${type}`, { type, enabled: false, defaultValue: values[1] }),
    context: { targetingKey: 'u' },
    defaultValue: REQUEST_DEFAULT,
    expected: failed('TYPE_MISMATCH'),
  });
}
add({
  name: 'type mismatch: variant value of another type',
  flag: flag('mismatch-variant', { type: 'boolean', defaultValue: false, variants: [{ name: 'a', value: 'yes', weight: 1 }] }),
  context: { targetingKey: 'u' },
  defaultValue: false,
  expected: failed('TYPE_MISMATCH', false),
});
add({
  name: 'type mismatch: unknown declared type',
  flag: flag('mismatch-declared', { type: 'json', defaultValue: { a: 1 } }),
  context: { targetingKey: 'u' },
  defaultValue: REQUEST_DEFAULT,
  expected: failed('TYPE_MISMATCH'),
});

const sampleValues: Record<string, unknown> = { boolean: true, string: 'blue', number: 2.5, object: { a: [1] } };
for (const [type, value] of Object.entries(sampleValues)) {
  for (const expectedType of Object.keys(sampleValues)) {
    add({
      name: `expected type ${expectedType} for a ${type} flag`,
      flag: flag(`expected-${type}`, { type, defaultValue: value }),
      context: { targetingKey: 'u' },
      defaultValue: sampleValues[expectedType],
      expectedType,
      expected: expectedType === type ? fellThrough(value) : failed('TYPE_MISMATCH', sampleValues[expectedType]),
    });
  }
}
add({
  name: 'expected type applies to a matching rule',
  flag: flag('expected-rule', { type: 'number', defaultValue: 1, targeting: [{ id: 'r', conditions: [], value: 2 }] }),
  context: { targetingKey: 'u' },
  defaultValue: 'n/a',
  expectedType: 'string',
  expected: failed('TYPE_MISMATCH', 'n/a'),
});
add({
  name: 'expected object accepts an array value',
  flag: flag('expected-array', { type: 'object', defaultValue: [1, 2] }),
  context: {},
  defaultValue: {},
  expectedType: 'object',
  expected: fellThrough([1, 2]),
});
add({
  name: 'expected type is not checked for a missing flag',
  flag: null,
  context: {},
  defaultValue: 'fallback',
  expectedType: 'boolean',
  expected: failed('FLAG_NOT_FOUND', 'fallback'),
});

// ---------------------------------------------------------------------------------------------
// Rollout (buckets from the engine, checked against Python's mmh3)

const ROLLOUT_FLAG = 'checkout-redesign';
const rolloutBucket = (key: string): number => bucket(ROLLOUT_FLAG, key, ROLLOUT_SALT);

function rolloutFlag(rolloutPercentage: number | undefined, extraRules: unknown[] = []): Record<string, unknown> {
  const rule: Record<string, unknown> = { id: 'ramp', conditions: [], value: 'on' };
  if (rolloutPercentage !== undefined) rule.rolloutPercentage = rolloutPercentage;
  return flag(ROLLOUT_FLAG, { targeting: [rule, ...extraRules] });
}

function rolloutCase(percentage: number, key: string, note: string): void {
  const inside = rolloutBucket(key) < Math.round(percentage * 1000) || percentage >= 100;
  add({
    name: `rollout ${percentage}%: ${key} (bucket ${rolloutBucket(key)}) ${inside ? 'inside' : 'outside'}${note}`,
    flag: rolloutFlag(percentage),
    context: { targetingKey: key },
    defaultValue: REQUEST_DEFAULT,
    expected: inside ? matched() : fellThrough(),
  });
}

for (let i = 1; i <= 40; i++) rolloutCase(50, `user-${i}`, '');
for (let i = 1; i <= 10; i++) rolloutCase(12.5, `account-${i}`, '');
for (const key of ['user-1', 'user-2', 'anonymous', 'é-ü-😀']) {
  rolloutCase(0, key, ', 0% holds nobody');
  rolloutCase(100, key, ', 100% holds everyone');
}

/** The first `user-N` whose rollout bucket satisfies the predicate. */
function findKey(predicate: (bucketValue: number) => boolean): string {
  for (let i = 0; ; i++) {
    if (predicate(rolloutBucket(`user-${i}`))) return `user-${i}`;
  }
}
const bucketZero = findKey((b) => b === 0);
const bucketTop = findKey((b) => b === 99_999);
const bucketBoundary = findKey((b) => b === 30_000);
const bucketBelowBoundary = findKey((b) => b === 29_999);
rolloutCase(0.001, bucketZero, ', smallest fraction holds bucket 0');
rolloutCase(0.001, bucketBelowBoundary, ', smallest fraction');
rolloutCase(99.999, bucketTop, ', largest fraction leaves bucket 99999 out');
rolloutCase(99.999, bucketBelowBoundary, ', largest fraction');
rolloutCase(30, bucketBoundary, ', bucket 30000 is the first outside 30%');
rolloutCase(30.001, bucketBoundary, ', 30.001% takes bucket 30000 in');
rolloutCase(30, bucketBelowBoundary, ', bucket 29999 is the last inside 30%');
rolloutCase(29.999, bucketBelowBoundary, ', 29.999% leaves bucket 29999 out');
rolloutCase(33.3333, findKey((b) => b === 33_333), ', 33.3333% rounds to 33333 buckets');
rolloutCase(150, 'user-1', ', above 100 holds everyone');
rolloutCase(-5, 'user-1', ', negative holds nobody');

for (const [context, note] of [
  [{}, 'no targetingKey'],
  [{ targetingKey: '' }, 'empty targetingKey'],
  [{ targetingKey: 42 }, 'numeric targetingKey'],
  [{ targetingKey: null }, 'null targetingKey'],
] as const) {
  add({
    name: `rollout 50%: ${note} never matches a partial rollout`,
    flag: rolloutFlag(50),
    context,
    defaultValue: REQUEST_DEFAULT,
    expected: fellThrough(),
  });
  add({
    name: `rollout 99.999%: ${note} never matches a partial rollout`,
    flag: rolloutFlag(99.999),
    context,
    defaultValue: REQUEST_DEFAULT,
    expected: fellThrough(),
  });
  add({
    name: `rollout 100%: ${note} matches a full rollout`,
    flag: rolloutFlag(100),
    context,
    defaultValue: REQUEST_DEFAULT,
    expected: matched(),
  });
  add({
    name: `rollout absent: ${note} matches`,
    flag: rolloutFlag(undefined),
    context,
    defaultValue: REQUEST_DEFAULT,
    expected: matched(),
  });
  add({
    name: `rollout 50%: ${note} falls to the next rule`,
    flag: rolloutFlag(50, [{ id: 'everyone', conditions: [], value: 'next' }]),
    context,
    defaultValue: REQUEST_DEFAULT,
    expected: matched('next'),
  });
}

const outsideHalf = findKey((b) => b >= 50_000);
const insideHalf = findKey((b) => b < 50_000);
add({
  name: `rollout: ${outsideHalf} outside 50% falls to the next rule`,
  flag: rolloutFlag(50, [{ id: 'everyone', conditions: [], value: 'next' }]),
  context: { targetingKey: outsideHalf },
  defaultValue: REQUEST_DEFAULT,
  expected: matched('next'),
});
add({
  name: `rollout: ${insideHalf} inside 50% takes the ramp rule`,
  flag: rolloutFlag(50, [{ id: 'everyone', conditions: [], value: 'next' }]),
  context: { targetingKey: insideHalf },
  defaultValue: REQUEST_DEFAULT,
  expected: matched('on'),
});
add({
  name: `rollout: conditions and rollout must both hold (${insideHalf} inside, condition fails)`,
  flag: flag(ROLLOUT_FLAG, {
    targeting: [{ id: 'ramp', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }], value: 'on', rolloutPercentage: 50 }],
  }),
  context: { targetingKey: insideHalf, plan: 'free' },
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough(),
});
add({
  name: `rollout: the bucket is per flag, ${insideHalf} inside 50% on every rule`,
  flag: flag(ROLLOUT_FLAG, {
    targeting: [
      { id: 'pro', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }], value: 'pro', rolloutPercentage: 50 },
      { id: 'free', conditions: [{ property: 'plan', operator: 'equals', value: 'free' }], value: 'free', rolloutPercentage: 50 },
    ],
  }),
  context: { targetingKey: insideHalf, plan: 'free' },
  defaultValue: REQUEST_DEFAULT,
  expected: matched('free'),
});

// ---------------------------------------------------------------------------------------------
// Variants (buckets from the engine, checked against Python's mmh3)

interface StoredVariant {
  name: string;
  value: unknown;
  weight: number;
}

function expectedVariant(flagKey: string, variants: StoredVariant[], key: string): StoredVariant {
  const total = variants.reduce((sum, variant) => sum + variant.weight, 0);
  const point = (bucket(flagKey, key, VARIANT_SALT) / 100_000) * total;
  let cumulative = 0;
  for (const variant of variants) {
    cumulative += variant.weight;
    if (point < cumulative) return variant;
  }
  return variants[variants.length - 1];
}

function variantCases(flagKey: string, type: string, defaultValue: unknown, variants: StoredVariant[], keys: string[]): void {
  for (const key of keys) {
    const variant = expectedVariant(flagKey, variants, key);
    add({
      name: `variants ${flagKey}: ${key} (bucket ${bucket(flagKey, key, VARIANT_SALT)}) gets ${variant.name}`,
      flag: flag(flagKey, { type, defaultValue, variants }),
      context: { targetingKey: key },
      defaultValue,
      expected: { value: variant.value, reason: 'VARIANT', variant: variant.name },
    });
  }
}

const userKeys = (prefix: string, count: number): string[] => Array.from({ length: count }, (_, i) => `${prefix}-${i + 1}`);

variantCases(
  'pricing-page',
  'string',
  'control',
  [
    { name: 'control', value: 'control', weight: 50 },
    { name: 'annual-first', value: 'annual', weight: 30 },
    { name: 'monthly-first', value: 'monthly', weight: 20 },
  ],
  userKeys('user', 30),
);
variantCases(
  'new-checkout',
  'boolean',
  false,
  [
    { name: 'off', value: false, weight: 1 },
    { name: 'on', value: true, weight: 1 },
  ],
  userKeys('visitor', 16),
);
variantCases(
  'search-limit',
  'number',
  10,
  [
    { name: 'ten', value: 10, weight: 1 / 3 },
    { name: 'twenty', value: 20, weight: 1 / 3 },
    { name: 'fifty', value: 50, weight: 1 / 3 },
  ],
  userKeys('acct', 12),
);
variantCases(
  'theme',
  'object',
  {},
  [
    { name: 'light', value: { bg: '#fff' }, weight: 0 },
    { name: 'dark', value: { bg: '#000' }, weight: 5 },
    { name: 'sepia', value: { bg: '#f4ecd8' }, weight: 0.5 },
  ],
  userKeys('reader', 12),
);
variantCases('only-one', 'string', 'off', [{ name: 'solo', value: 'solo', weight: 7 }], ['user-1', 'user-2', 'zz']);
variantCases(
  'zero-then-all',
  'string',
  'off',
  [
    { name: 'never', value: 'never', weight: 0 },
    { name: 'always', value: 'always', weight: 100 },
    { name: 'also-never', value: 'also-never', weight: 0 },
  ],
  ['user-1', 'user-2', 'user-3'],
);

const twoWay = [
  { name: 'a', value: 'A', weight: 50 },
  { name: 'b', value: 'B', weight: 50 },
];
for (const [context, note] of [
  [{}, 'no targetingKey'],
  [{ targetingKey: '' }, 'empty targetingKey'],
  [{ targetingKey: 7 }, 'numeric targetingKey'],
] as const) {
  add({
    name: `variants: ${note} is TARGETING_KEY_MISSING`,
    flag: flag('variants-key', { variants: twoWay }),
    context,
    defaultValue: REQUEST_DEFAULT,
    expected: failed('TARGETING_KEY_MISSING'),
  });
}
add({
  name: 'variants: all weights zero means no variants',
  flag: flag('variants-zero', { variants: [{ name: 'a', value: 'A', weight: 0 }, { name: 'b', value: 'B', weight: 0 }] }),
  context: { targetingKey: 'user-1' },
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough(),
});
add({
  name: 'variants: all weights zero needs no targeting key',
  flag: flag('variants-zero', { variants: [{ name: 'a', value: 'A', weight: 0 }] }),
  context: {},
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough(),
});
add({
  name: 'variants: empty list means the default',
  flag: flag('variants-empty', { variants: [] }),
  context: { targetingKey: 'user-1' },
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough(),
});
add({
  name: 'variants: malformed variants are ignored',
  flag: flag('variants-malformed', {
    variants: [
      { name: 'negative', value: 'neg', weight: -10 },
      { name: 'text-weight', value: 'txt', weight: '50' },
      null,
      { value: 'nameless', weight: 5 },
      { name: 'valid', value: 'valid', weight: 1 },
    ],
  }),
  context: { targetingKey: 'user-1' },
  defaultValue: REQUEST_DEFAULT,
  expected: { value: 'valid', reason: 'VARIANT', variant: 'valid' },
});
add({
  name: 'variants: a variant list that is not an array is ignored',
  flag: flag('variants-malformed', { variants: 'a,b' }),
  context: { targetingKey: 'user-1' },
  defaultValue: REQUEST_DEFAULT,
  expected: fellThrough(),
});
const rampedOut = findKey((b) => b >= 20_000);
add({
  name: `variants: ${rampedOut} outside a 20% rule rollout gets a variant`,
  flag: flag(ROLLOUT_FLAG, {
    targeting: [{ id: 'ramp', conditions: [], value: 'ramp', rolloutPercentage: 20 }],
    variants: twoWay,
  }),
  context: { targetingKey: rampedOut },
  defaultValue: REQUEST_DEFAULT,
  expected: (() => {
    const variant = expectedVariant(ROLLOUT_FLAG, twoWay, rampedOut);
    return { value: variant.value, reason: 'VARIANT', variant: variant.name };
  })(),
});

const output = `[\n${cases.map((entry) => `  ${JSON.stringify(entry)}`).join(',\n')}\n]\n`;
writeFileSync(join(__dirname, 'cases.json'), output);
console.log(`wrote ${cases.length} cases`);
