import fc from 'fast-check';
import {
  BUCKET_COUNT,
  OPERATORS,
  ROLLOUT_SALT,
  VARIANT_SALT,
  bucket,
  compileFlag,
  evaluate,
  murmur3,
  rolloutThreshold,
  type EvaluationContext,
  type FlagDefinition,
} from '../../api/features/evaluation/engine';

const SEED = 20240501;
const run = <T>(property: fc.IProperty<T>, numRuns = 200): void => fc.assert(property, { seed: SEED, numRuns });

/** Distinct random targeting keys, deterministic for the seed. */
function sampleKeys(count: number): string[] {
  const keys = new Set<string>();
  for (const key of fc.sample(fc.string({ minLength: 1, maxLength: 24, unit: 'grapheme' }), { seed: SEED, numRuns: count * 2 })) {
    keys.add(key);
  }
  for (const key of fc.sample(fc.uuid(), { seed: SEED, numRuns: count })) {
    if (keys.size >= count) break;
    keys.add(key);
  }
  if (keys.size < count) throw new Error(`only ${keys.size} distinct keys sampled`);
  return [...keys].slice(0, count);
}

describe('bucketing', () => {
  it('matches published MurmurHash3 x86_32 vectors on UTF-8', () => {
    expect(murmur3('')).toBe(0);
    expect(murmur3('hello')).toBe(613153351);
    expect(murmur3('The quick brown fox jumps over the lazy dog')).toBe(776992547);
    // Checked with Python: mmh3.hash('héllo wörld 😀'.encode(), 0, signed=False)
    expect(murmur3('héllo wörld 😀')).toBe(255077804);
    // A lone surrogate hashes as U+FFFD, like TextEncoder.
    expect(murmur3('a\ud800b')).toBe(murmur3('a\ufffdb'));
  });

  it("is the documented formula (flagd's fractional mapping), with values checked against Python mmh3", () => {
    // Python: (mmh3.hash(f"{salt}:{flag}:{key}".encode(), 0, signed=False) * 100000) >> 32
    expect(bucket('my-flag', 'user-1', ROLLOUT_SALT)).toBe(88358);
    expect(bucket('my-flag', 'user-1', VARIANT_SALT)).toBe(58386);
    expect(bucket('my-flag', 'alice', ROLLOUT_SALT)).toBe(26361);
    expect(bucket('my-flag', '😀x', VARIANT_SALT)).toBe(54702);
    run(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), fc.constantFrom(ROLLOUT_SALT, VARIANT_SALT), (flagKey, key, salt) => {
        // The same mapping in integer arithmetic, as flagd computes it.
        const expected = Number((BigInt(murmur3(`${salt}:${flagKey}:${key}`)) * BigInt(BUCKET_COUNT)) >> 32n);
        expect(bucket(flagKey, key, salt)).toBe(expected);
      }),
    );
  });

  it('always puts the same (flagKey, targetingKey) in the same bucket in [0, 100000)', () => {
    run(
      fc.property(fc.string(), fc.string({ unit: 'binary', minLength: 1 }), (flagKey, key) => {
        const first = bucket(flagKey, key, ROLLOUT_SALT);
        expect(Number.isInteger(first)).toBe(true);
        expect(first).toBeGreaterThanOrEqual(0);
        expect(first).toBeLessThan(BUCKET_COUNT);
        expect(bucket(flagKey, key, ROLLOUT_SALT)).toBe(first);
        // Separately compiled copies (another instance) and unrelated attributes change nothing.
        const here = evaluate(compileFlag(rolloutFlag(flagKey, 50)), flagKey, { targetingKey: key }, 'x');
        const there = evaluate(compileFlag(rolloutFlag(flagKey, 50)), flagKey, { targetingKey: key, plan: 'pro' }, 'x');
        expect(there).toEqual(here);
        expect(here.value).toBe(first < 50_000);
      }),
    );
  });

  it('keeps rollout and variant buckets independent', () => {
    const keys = sampleKeys(20_000);
    // Among keys inside a 30% rollout, the variant bucket should still be uniform.
    const inside = keys.filter((key) => bucket('flag-a', key, ROLLOUT_SALT) < 30_000);
    const lowVariant = inside.filter((key) => bucket('flag-a', key, VARIANT_SALT) < 50_000).length;
    expect(Math.abs(lowVariant / inside.length - 0.5)).toBeLessThan(0.025);
  });
});

function rolloutFlag(key: string, rolloutPercentage: number): FlagDefinition {
  return {
    key,
    type: 'boolean',
    enabled: true,
    defaultValue: false,
    variants: [],
    targeting: [{ id: 'ramp', conditions: [], value: true, rolloutPercentage }],
  };
}

describe('rollout', () => {
  const keys = sampleKeys(20_000);

  it.each([1, 5, 30, 50, 72.5, 99])('holds about %p%% of 20,000 random keys (±1.5 points)', (percentage) => {
    const compiled = compileFlag(rolloutFlag('rollout-share', percentage));
    let inside = 0;
    for (const key of keys) {
      if (evaluate(compiled, 'rollout-share', { targetingKey: key }, false).value === true) inside++;
    }
    expect(Math.abs((inside / keys.length) * 100 - percentage)).toBeLessThanOrEqual(1.5);
  });

  it('is monotonic: a key inside at p stays inside at every q > p', () => {
    run(
      fc.property(
        fc.string({ minLength: 1 }),
        fc.string({ minLength: 1 }),
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.double({ min: 0, max: 100, noNaN: true }),
        (flagKey, key, a, b) => {
          const [low, high] = a <= b ? [a, b] : [b, a];
          const at = (p: number) => evaluate(compileFlag(rolloutFlag(flagKey, p)), flagKey, { targetingKey: key }, false).value;
          if (at(low) === true) expect(at(high)).toBe(true);
        },
      ),
      500,
    );
  });

  it('resolves 0.001 points: p% holds exactly the buckets below round(p * 1000)', () => {
    run(
      fc.property(fc.integer({ min: 0, max: 100_000 }), (thousandths) => {
        expect(rolloutThreshold(thousandths / 1000)).toBe(thousandths);
      }),
    );
  });
});

describe('variants', () => {
  const keys = sampleKeys(20_000);

  it('follow their weights over 20,000 random keys (±1.5 points)', () => {
    const weights = { control: 50, blue: 30, green: 15, red: 5, never: 0 };
    const definition: FlagDefinition = {
      key: 'variant-share',
      type: 'string',
      enabled: true,
      defaultValue: 'control',
      targeting: [],
      variants: Object.entries(weights).map(([name, weight]) => ({ name, value: name, weight })),
    };
    const compiled = compileFlag(definition);
    const counts = new Map<string, number>();
    for (const key of keys) {
      const variant = evaluate(compiled, 'variant-share', { targetingKey: key }, 'x').variant ?? 'none';
      counts.set(variant, (counts.get(variant) ?? 0) + 1);
    }
    expect(counts.get('none')).toBeUndefined();
    for (const [name, weight] of Object.entries(weights)) {
      expect(Math.abs(((counts.get(name) ?? 0) / keys.length) * 100 - weight)).toBeLessThanOrEqual(1.5);
    }
    expect(counts.get('never')).toBeUndefined();
  });

  it('always pick the same variant for the same key', () => {
    const compiled = compileFlag({
      key: 'sticky',
      type: 'number',
      enabled: true,
      defaultValue: 0,
      targeting: [],
      variants: [
        { name: 'one', value: 1, weight: 1 },
        { name: 'two', value: 2, weight: 2 },
      ],
    });
    run(
      fc.property(fc.string({ minLength: 1 }), (key) => {
        expect(evaluate(compiled, 'sticky', { targetingKey: key }, 0)).toEqual(evaluate(compiled, 'sticky', { targetingKey: key }, 0));
      }),
    );
  });
});

describe('evaluate never throws', () => {
  const operand = fc.oneof(
    fc.jsonValue(),
    fc.constantFrom('^a+$', '(a+)+', '[', '1.2.3', 'v2.0.0-rc.1', '2024-01-01', '2024-01-01T10:00:00+02:00', '10', 'x.y'),
  );
  const condition = fc.record({
    property: fc.oneof(fc.constantFrom('a', 'b', 'a.b', 'targetingKey', 'constructor', '__proto__'), fc.string()),
    operator: fc.oneof(fc.constantFrom(...OPERATORS), fc.string()),
    value: operand,
  });
  const storedFlag = fc.record({
    key: fc.string(),
    type: fc.oneof(fc.constantFrom('boolean', 'string', 'number', 'object'), fc.string()),
    enabled: fc.oneof(fc.boolean(), fc.jsonValue()),
    defaultValue: fc.jsonValue(),
    variants: fc.oneof(
      fc.array(fc.record({ name: fc.string(), value: fc.jsonValue(), weight: fc.oneof(fc.double(), fc.jsonValue()) })),
      fc.jsonValue(),
    ),
    targeting: fc.oneof(
      fc.array(
        fc.record(
          {
            id: fc.string(),
            conditions: fc.oneof(fc.array(condition, { maxLength: 4 }), fc.jsonValue()),
            value: fc.jsonValue(),
            rolloutPercentage: fc.oneof(fc.double(), fc.jsonValue()),
          },
          { requiredKeys: ['id', 'conditions'] },
        ),
        { maxLength: 4 },
      ),
      fc.jsonValue(),
    ),
  });
  const context = fc.oneof(
    fc.dictionary(
      fc.oneof(fc.constantFrom('a', 'b', 'targetingKey', '__proto__', 'constructor'), fc.string()),
      fc.oneof(fc.jsonValue(), fc.anything()),
    ),
    fc.record({ a: fc.dictionary(fc.string(), fc.jsonValue()), targetingKey: fc.anything() }),
    fc.anything(),
  );

  it('on arbitrary stored flags and contexts', () => {
    run(
      fc.property(storedFlag, context, fc.jsonValue(), fc.constantFrom(undefined, 'boolean', 'string', 'number', 'object'), (stored, ctx, requestDefault, expectedType) => {
        const compiled = compileFlag(stored as unknown as FlagDefinition);
        const result = evaluate(compiled, 'k', ctx as EvaluationContext, requestDefault, { expectedType: expectedType as never });
        expect(['TARGETING_MATCH', 'DEFAULT', 'VARIANT', 'ERROR']).toContain(result.reason);
        if (result.reason === 'ERROR') expect(result.value).toBe(requestDefault);
      }),
      1000,
    );
  });
});
