import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { FlagdCore, MemoryStorage } from '@openfeature/flagd-core';
import { DefaultLogger, type EvaluationContext as OpenFeatureContext, type FlagValue } from '@openfeature/core';
import fc from 'fast-check';
import {
  compileFlag,
  evaluate,
  OPERATORS,
  type CohortDefinition,
  type Condition,
  type EvaluationContext,
  type EvaluationResult,
  type FlagDefinition,
  type FlagType,
  type Variant,
} from '../../api/features/evaluation/engine';
import {
  DEFAULT_VARIANT,
  DISABLED_VARIANT,
  inProcessIssues,
  locatedInProcessIssues,
  toFlagdDocument,
  type FlagdDocument,
  type TranslatableFlag,
} from '../../api/features/flagd/translate';
import { FlagContentPatchSchema } from '../../api/features/flags/schema';
import { flagContentProblems } from '../../api/features/flags/validation';
import cases from '../evaluation/cases.json';
import { APPROXIMATIONS } from './approximations';

const SEED = 20261126;
const NO_COHORTS: ReadonlyMap<string, CohortDefinition> = new Map();
const quietLogger = { ...new DefaultLogger(), debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

interface EvaluationCase {
  name: string;
  flagKey: string;
  flag: FlagDefinition | null;
  context: unknown;
  defaultValue: unknown;
  expectedType?: FlagType;
}

/** What a flagd provider answers, reduced to what we compare. */
interface Answer {
  value: unknown;
  variant?: string;
  error: boolean;
}

function flagdCoreFor(document: FlagdDocument): FlagdCore {
  const core = new FlagdCore(undefined, quietLogger);
  core.setConfigurations(JSON.stringify(document));
  return core;
}

function flagdAnswer(core: FlagdCore, key: string, type: FlagType, context: Record<string, unknown>, callerDefault: unknown): Answer {
  const ctx = context as OpenFeatureContext;
  const resolution =
    type === 'boolean'
      ? core.resolveBooleanEvaluation(key, callerDefault as boolean, ctx)
      : type === 'string'
        ? core.resolveStringEvaluation(key, callerDefault as string, ctx)
        : type === 'number'
          ? core.resolveNumberEvaluation(key, callerDefault as number, ctx)
          : core.resolveObjectEvaluation(key, callerDefault as never, ctx);
  return { value: resolution.value as FlagValue, variant: resolution.variant, error: resolution.reason === 'ERROR' };
}

/** Our result as a flagd answer: the variant names of docs/flagd.md#variants. */
function ourAnswer(result: EvaluationResult): Answer {
  if (result.reason === 'ERROR') return { value: result.value, error: true };
  const variant = result.variant ?? (result.ruleId !== undefined ? `rule:${result.ruleId}` : result.disabled ? DISABLED_VARIANT : DEFAULT_VARIANT);
  return { value: result.value, variant, error: false };
}

function compare(flag: FlagDefinition, cohorts: ReadonlyMap<string, CohortDefinition>, context: Record<string, unknown>, callerDefault: unknown, type: FlagType = flag.type) {
  const ours = ourAnswer(evaluate(compileFlag(flag, cohorts), flag.key, context as EvaluationContext, callerDefault, { expectedType: type }));
  const theirs = flagdAnswer(flagdCoreFor(toFlagdDocument([{ ...flag, version: 1 }], cohorts)), flag.key, type, context, callerDefault);
  return { ours, theirs };
}

const evaluationCases = (cases as unknown as EvaluationCase[]).filter(
  (entry): entry is EvaluationCase & { flag: FlagDefinition } =>
    entry.flag !== null && typeof entry.context === 'object' && entry.context !== null && !Array.isArray(entry.context),
);


describe('translated cases (test/evaluation/cases.json) on flagd-core', () => {
  const translatable = evaluationCases.filter((entry) => inProcessIssues({ ...entry.flag, version: 1 }, NO_COHORTS).length === 0);
  const exact = translatable.filter((entry) => !(entry.name in APPROXIMATIONS));

  it('differs only where docs/flagd.md says so', () => {
    const differing = translatable
      .filter((entry) => {
        const { ours, theirs } = compare(entry.flag, NO_COHORTS, entry.context as Record<string, unknown>, entry.defaultValue, entry.expectedType ?? entry.flag.type);
        return JSON.stringify(ours) !== JSON.stringify(theirs);
      })
      .map((entry) => entry.name);
    expect(differing.sort()).toEqual(Object.keys(APPROXIMATIONS).sort());
  });

  it('covers most cases', () => {
    expect(translatable.length).toBeGreaterThan(evaluationCases.length * 0.8);
  });

  it.each(exact.map((entry) => [entry.name, entry] as const))('%s', (_name, entry) => {
    const { ours, theirs } = compare(entry.flag, NO_COHORTS, entry.context as Record<string, unknown>, entry.defaultValue, entry.expectedType ?? entry.flag.type);
    expect(theirs).toEqual(ours);
  });

  it('answers ERROR with the caller default for every enabled flag it cannot translate', () => {
    const untranslatable = evaluationCases.filter((entry) => !translatable.includes(entry) && entry.flag.enabled);
    expect(untranslatable.length).toBeGreaterThan(0);
    for (const entry of untranslatable) {
      const document = toFlagdDocument([{ ...entry.flag, version: 3 }], NO_COHORTS);
      expect(document.flags[entry.flag.key].metadata.inProcess).toBe('unsupported');
      const theirs = flagdAnswer(flagdCoreFor(document), entry.flag.key, entry.flag.type, entry.context as Record<string, unknown>, entry.defaultValue);
      expect(theirs).toEqual({ value: entry.defaultValue, variant: undefined, error: true });
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Generated flags and contexts

const PROPERTIES = ['plan', 'age', 'tags', 'user.country', 'version'];
const stringValue = fc.constantFrom('gold', 'Gold', 'gold-plus', 'x', '', 'été', '😀', '5', '1.2.3', 'v2.0.0', '1.0.0-beta.1');
const primitive = fc.oneof(stringValue, fc.integer({ min: -3, max: 12 }), fc.constantFrom(0.5, -1.5, true, false));
const semverText = fc.constantFrom('1.2.3', 'v2.0.0', '1.0.0-beta.1', '1.0.0-alpha', '0.9.12', '10.0.0', '1.0.0+build.5');

const condition: fc.Arbitrary<Condition> = fc.oneof(
  fc.record({ property: fc.constantFrom(...PROPERTIES), operator: fc.constantFrom('equals', 'not_equals', 'contains'), value: primitive }),
  fc.record({ property: fc.constantFrom(...PROPERTIES), operator: fc.constantFrom('in', 'not_in'), value: fc.array(primitive, { maxLength: 4 }) }),
  fc.record({ property: fc.constantFrom(...PROPERTIES), operator: fc.constantFrom('starts_with', 'ends_with'), value: stringValue }),
  fc.record({ property: fc.constantFrom(...PROPERTIES), operator: fc.constantFrom('gt', 'gte', 'lt', 'lte'), value: fc.oneof(fc.integer({ min: -2, max: 12 }), fc.constantFrom(0.5, '7', '-1.5')) }),
  fc.record({ property: fc.constantFrom(...PROPERTIES), operator: fc.constantFrom('semver_eq', 'semver_gt', 'semver_lt'), value: semverText }),
  fc.record({ property: fc.constantFrom(...PROPERTIES), operator: fc.constant('exists'), value: fc.constantFrom(true, false, undefined) }),
  fc.record({ property: fc.constant('targetingKey'), operator: fc.constant('in_cohort'), value: fc.constantFrom('beta', 'staff', 'gone') }),
);

const cohorts: ReadonlyMap<string, CohortDefinition> = new Map([
  ['beta', { id: 'beta', rules: [{ id: 'b1', conditions: [{ property: 'plan', operator: 'in', value: ['gold', 'x'] }] }, { id: 'b2', conditions: [{ property: 'age', operator: 'gte', value: 10 }] }] }],
  ['staff', { id: 'staff', rules: [{ id: 's1', conditions: [{ property: 'user.country', operator: 'equals', value: 'été' }, { property: 'version', operator: 'semver_gt', value: '1.0.0' }] }] }],
]);

const percentage = fc.oneof(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 0, max: 100_000 }).map((n) => n / 1000));
const weight = fc.oneof(fc.integer({ min: 0, max: 100 }), fc.constantFrom(33.3, 0.001, 12.5, 66.7));

const generatedFlag: fc.Arbitrary<FlagDefinition> = fc.record({
  key: fc.constantFrom('gen-flag', 'checkout.v2', 'a'),
  type: fc.constant('string' as const),
  enabled: fc.oneof(fc.constant(true), fc.constant(true), fc.constant(false)),
  defaultValue: fc.constant('off'),
  variants: fc.oneof(
    fc.constant<Variant[]>([]),
    fc.array(fc.record({ name: fc.constantFrom('red', 'green', 'blue', 'default'), value: fc.constantFrom('R', 'G', 'B', 'off'), weight }), { minLength: 1, maxLength: 4 }),
  ),
  targeting: fc.array(
    fc.record(
      {
        id: fc.constantFrom('r1', 'r2', 'r3', 'r4'),
        conditions: fc.array(condition, { maxLength: 3 }),
        value: fc.constantFrom('on', 'beta', 'v1'),
        rolloutPercentage: percentage,
      },
      { requiredKeys: ['id', 'conditions', 'value'] },
    ),
    { maxLength: 4 },
  ),
});

// No numeric strings: in-process they do not compare with gt..lte (APPROXIMATIONS above).
const attributePrimitive = fc.oneof(stringValue.filter((text) => Number.isNaN(Number(text)) || text === ''), fc.integer({ min: -3, max: 12 }), fc.constantFrom(0.5, -1.5, true, false));
const attribute = fc.oneof(attributePrimitive, fc.constant(null), fc.array(attributePrimitive, { maxLength: 3 }), fc.constant({ nested: 1 }), semverText);
const generatedContext: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    targetingKey: fc.oneof(fc.string({ minLength: 0, maxLength: 12 }), fc.uuid(), fc.constant(null)),
    plan: attribute,
    age: attribute,
    tags: attribute,
    user: fc.oneof(fc.record({ country: attribute }, { requiredKeys: [] }), attribute),
    version: attribute,
  },
  { requiredKeys: [] },
);

describe('generated flags and contexts on flagd-core', () => {
  it('answer as our engine for every translatable flag', () => {
    fc.assert(
      fc.property(generatedFlag, fc.array(generatedContext, { minLength: 1, maxLength: 8 }), (flag, contexts) => {
        const issues = inProcessIssues({ ...flag, version: 1 }, cohorts);
        // Duplicate rule ids or a variant called "default" with another value than the default.
        fc.pre(issues.length === 0);
        const core = flagdCoreFor(toFlagdDocument([{ ...flag, version: 1 }], cohorts));
        const compiled = compileFlag(flag, cohorts);
        for (const context of contexts) {
          const ours = ourAnswer(evaluate(compiled, flag.key, context as EvaluationContext, 'caller'));
          expect(flagdAnswer(core, flag.key, 'string', context, 'caller')).toEqual(ours);
        }
      }),
      { seed: SEED, numRuns: 400 },
    );
  });

  it('place targeting keys in the same rollout and variant buckets', () => {
    const flag: FlagDefinition = {
      key: 'split',
      type: 'string',
      enabled: true,
      defaultValue: 'off',
      variants: [
        { name: 'a', value: 'A', weight: 33.3 },
        { name: 'b', value: 'B', weight: 33.3 },
        { name: 'c', value: 'C', weight: 33.4 },
      ],
      targeting: [{ id: 'canary', conditions: [], value: 'on', rolloutPercentage: 12.345 }],
    };
    const core = flagdCoreFor(toFlagdDocument([{ ...flag, version: 1 }], NO_COHORTS));
    const compiled = compileFlag(flag);
    const seen = new Set<string>();
    for (const targetingKey of fc.sample(fc.string({ minLength: 1, maxLength: 16, unit: 'binary-ascii' }), { seed: SEED, numRuns: 3000 })) {
      const ours = ourAnswer(evaluate(compiled, flag.key, { targetingKey }, 'caller'));
      seen.add(ours.variant!);
      expect(flagdAnswer(core, flag.key, 'string', { targetingKey }, 'caller')).toEqual(ours);
    }
    expect(seen).toEqual(new Set(['rule:canary', 'a', 'b', 'c']));
  });
});

describe('non-ASCII targeting keys on flagd-core', () => {
  const unicodeKeys = fc.sample(fc.string({ minLength: 1, maxLength: 8, unit: 'grapheme' }), { seed: SEED, numRuns: 300 }).filter((key) => [...key].some((character) => character.codePointAt(0)! > 0x7f));

  it('answer as our engine wherever no bucket decides', () => {
    const flag: FlagDefinition = {
      key: 'unicode',
      type: 'string',
      enabled: true,
      defaultValue: 'off',
      variants: [],
      targeting: [{ id: 'keyed', conditions: [{ property: 'targetingKey', operator: 'starts_with', value: 'é' }], value: 'accent' }],
    };
    const core = flagdCoreFor(toFlagdDocument([{ ...flag, version: 1 }], NO_COHORTS));
    const compiled = compileFlag(flag);
    for (const targetingKey of [...unicodeKeys, 'été', 'émile']) {
      expect(flagdAnswer(core, 'unicode', 'string', { targetingKey }, 'caller')).toEqual(ourAnswer(evaluate(compiled, 'unicode', { targetingKey }, 'caller')));
    }
  });

  it('may be bucketed differently: flagd-core hashes UTF-16 code units, not UTF-8 (docs/flagd.md#providers)', () => {
    const flag: FlagDefinition = { key: 'split', type: 'string', enabled: true, defaultValue: 'off', variants: [], targeting: [{ id: 'half', conditions: [], value: 'on', rolloutPercentage: 50 }] };
    const core = flagdCoreFor(toFlagdDocument([{ ...flag, version: 1 }], NO_COHORTS));
    const compiled = compileFlag(flag);
    const differing = unicodeKeys.filter(
      (targetingKey) => flagdAnswer(core, 'split', 'string', { targetingKey }, 'caller').variant !== ourAnswer(evaluate(compiled, 'split', { targetingKey }, 'caller')).variant,
    );
    expect(unicodeKeys.length).toBeGreaterThan(50);
    expect(differing.length).toBeGreaterThan(0);
  });
});

describe('variant bucket boundaries', () => {
  it('reproduce our floating-point comparison at every boundary', () => {
    // 57 * 1000 / 100: (57000 / 100000) * 100 is 56.99999999999999 in a double, so bucket 57000 is still the first variant's.
    const flag: FlagDefinition = {
      key: 'edges',
      type: 'string',
      enabled: true,
      defaultValue: 'off',
      variants: [
        { name: 'first', value: 'F', weight: 57 },
        { name: 'second', value: 'S', weight: 43 },
      ],
      targeting: [],
    };
    const fractional = (toFlagdDocument([{ ...flag, version: 1 }], NO_COHORTS).flags.edges.targeting as { if: [unknown, { fractional: unknown[] }] }).if[1].fractional;
    const compiled = compileFlag(flag);
    const firstWeight = (fractional[1] as [string, number])[1];
    expect((fractional[1] as [string, number])[1] + (fractional[2] as [string, number])[1]).toBe(100_000);
    // The first bucket outside the first variant is the first one our comparison puts outside it.
    const inside = (b: number) => (b / 100_000) * compiled.totalVariantWeight < compiled.variants[0].cumulativeWeight;
    expect(inside(firstWeight - 1)).toBe(true);
    expect(inside(firstWeight)).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------
// What cannot be translated

describe('untranslatable targeting', () => {
  const base: FlagDefinition = { key: 'untranslatable', type: 'boolean', enabled: true, defaultValue: false, variants: [], targeting: [] };
  const rule = (conditions: Condition[]) => ({ ...base, targeting: [{ id: 'r1', conditions: [{ property: 'plan', operator: 'equals', value: 'gold' }, ...conditions], value: true }] });

  it.each([
    ['matches', { property: 'email', operator: 'matches', value: '@example\\.com$' }],
    ['before', { property: 'signup', operator: 'before', value: '2024-01-01' }],
    ['after', { property: 'signup', operator: 'after', value: '2024-01-01' }],
    ['gt', { property: 'signup', operator: 'gt', value: '2024-01-01T00:00:00Z' }],
    ['equals', { property: 'constructor.name', operator: 'equals', value: 'Object' }],
    ['exists', { property: '$flagd.flagKey', operator: 'exists', value: true }],
  ] as const)('%s: an issue with the path, and ERROR with the caller default from every provider', (operator, extra) => {
    const flag = { ...rule([extra as Condition]), version: 4 };
    expect(locatedInProcessIssues(flag, NO_COHORTS)).toEqual([{ ruleId: 'r1', operator, path: 'targeting.0.conditions.1.operator', message: expect.any(String) }]);
    const document = toFlagdDocument([flag], NO_COHORTS);
    expect(document.flags.untranslatable.metadata).toEqual({ flagKey: 'untranslatable', version: 4, type: 'boolean', inProcess: 'unsupported' });
    const core = flagdCoreFor(document);
    for (const context of [{}, { plan: 'gold', email: 'a@example.com', signup: '2023-01-01' }, { targetingKey: 'k' }]) {
      expect(flagdAnswer(core, 'untranslatable', 'boolean', context, true)).toEqual({ value: true, variant: undefined, error: true });
    }
  });

  it('counts the conditions of the cohorts a flag names', () => {
    const withCohort = new Map<string, CohortDefinition>([['corp', { id: 'corp', rules: [{ id: 'c1', conditions: [{ property: 'email', operator: 'matches', value: '@corp\\.com$' }] }] }]]);
    const flag = { ...rule([{ property: 'targetingKey', operator: 'in_cohort', value: 'corp' }]), version: 1 };
    expect(inProcessIssues(flag, withCohort)).toEqual([{ ruleId: 'r1', operator: 'in_cohort', message: expect.stringContaining('regular-expression') }]);
    expect(inProcessIssues(flag, cohorts)).toEqual([]);
  });

  it('is unsupported even while disabled: enabling it must not change what providers answer', () => {
    const flag = { ...rule([{ property: 'email', operator: 'matches', value: 'x' }]), enabled: false, defaultValue: true, version: 2 };
    expect(inProcessIssues(flag, NO_COHORTS)).toHaveLength(1);
    const core = flagdCoreFor(toFlagdDocument([flag], NO_COHORTS));
    expect(flagdAnswer(core, 'untranslatable', 'boolean', { plan: 'gold' }, false)).toEqual({ value: false, variant: undefined, error: true });
  });

  it('refuses array values of object flags: flagd holds objects only', () => {
    const flag = { ...base, type: 'object' as const, defaultValue: {}, targeting: [{ id: 'list', conditions: [], value: [1, 2] }], version: 1 };
    expect(locatedInProcessIssues(flag, NO_COHORTS)).toEqual([{ ruleId: 'list', operator: null, path: 'targeting.0.value', message: expect.any(String) }]);
  });

  it('names every operator in the docs table', () => {
    const docs = readFileSync(path.join(__dirname, '../../docs/flagd.md'), 'utf8');
    for (const operator of OPERATORS) expect(docs).toMatch(new RegExp(`^\\| \`${operator}\` \\|`, 'm'));
  });
});

describe('memoized translation', () => {
  it('translates a flag record once, and again when a cohort it names changes', () => {
    const flag: TranslatableFlag = { key: 'memo', type: 'boolean', enabled: true, defaultValue: false, variants: [], targeting: [{ id: 'r', conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: 'beta' }], value: true }], version: 1 };
    const first = toFlagdDocument([flag], cohorts);
    expect(toFlagdDocument([flag], cohorts).flags.memo).toBe(first.flags.memo);
    expect(first.$evaluators).toHaveProperty(['cohort:beta']);
    const changed = new Map(cohorts).set('beta', { id: 'beta', rules: [{ id: 'b1', conditions: [{ property: 'plan', operator: 'matches', value: 'g' }] }] });
    expect(toFlagdDocument([flag], changed).flags.memo.metadata.inProcess).toBe('unsupported');
  });
});

// ---------------------------------------------------------------------------------------------
// flagd's published schema

/**
 * flagd's published schemas (github.com/open-feature/flagd-schemas, as the Go module proxy serves
 * it): scripts/test-infra.sh downloads them at a pinned version and exports their directory.
 */
function publishedSchemaDirectory(): string {
  const directory = process.env.FLAGD_SCHEMAS_DIR;
  if (directory === undefined || !existsSync(path.join(directory, 'flags.json'))) {
    throw new Error('FLAGD_SCHEMAS_DIR must name flagd\'s published schemas: eval "$(bash scripts/test-infra.sh env)"');
  }
  return directory;
}

describe("documents valid against flagd's flags.json", () => {
  const documents = (): FlagdDocument[] => [
    toFlagdDocument(
      evaluationCases
        // Flags that can be stored: a default of another type than the flag's is refused at write time.
        .filter((entry) => {
          const parsed = FlagContentPatchSchema.safeParse(entry.flag);
          return parsed.success && flagContentProblems(parsed.data, entry.flag.type).length === 0;
        })
        .map((entry, index) => ({ ...entry.flag, key: `${index}-${entry.flag.key}`, version: index + 1 })),
      NO_COHORTS,
    ),
    ...fc.sample(fc.array(generatedFlag, { minLength: 1, maxLength: 5 }), { seed: SEED, numRuns: 100 }).map((flags) =>
      toFlagdDocument(
        flags.map((flag, index) => ({ ...flag, key: `${index}-${flag.key}`, version: 1 })),
        cohorts,
      ),
    ),
  ];

  it("pass flagd-core's strict validation (its compiled copy of the schema)", () => {
    for (const document of documents()) {
      expect(() => new MemoryStorage(quietLogger).setConfigurations(JSON.stringify(document), true)).not.toThrow();
    }
  });

  it('validate against the published flags.json and targeting.json', async () => {
    const directory = publishedSchemaDirectory();
    const { Ajv } = await import('ajv');
    const ajv = new Ajv({ strict: false, allErrors: true });
    ajv.addSchema(JSON.parse(readFileSync(path.join(directory, 'targeting.json'), 'utf8')));
    const validate = ajv.compile(JSON.parse(readFileSync(path.join(directory, 'flags.json'), 'utf8')));
    for (const document of documents()) {
      const valid = validate(document);
      expect(valid ? [] : validate.errors).toEqual([]);
    }
  });
});
