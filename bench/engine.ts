/**
 * Micro-benchmark of the evaluation engine: evaluate() on a flag with three rules and three
 * weighted variants, against a bare function call that allocates a result of the same shape.
 * Run: npx tsx bench/engine.ts
 */
import { compileFlag, evaluate, type EvaluationContext, type EvaluationResult, type FlagDefinition } from '../api/features/evaluation/engine';

const definition: FlagDefinition = {
  key: 'checkout-experiment',
  type: 'string',
  enabled: true,
  defaultValue: 'control',
  targeting: [
    {
      id: 'enterprise-eu',
      conditions: [
        { property: 'country', operator: 'in', value: ['FR', 'DE', 'IT', 'ES', 'NL'] },
        { property: 'plan', operator: 'equals', value: 'enterprise' },
      ],
      value: 'enterprise',
    },
    {
      id: 'staff',
      conditions: [{ property: 'email', operator: 'ends_with', value: '@staff.example.com' }],
      value: 'staff',
    },
    {
      id: 'new-app-ramp',
      conditions: [{ property: 'appVersion', operator: 'semver_gt', value: '5.0.0' }],
      value: 'ramp',
      rolloutPercentage: 10,
    },
  ],
  variants: [
    { name: 'control', value: 'control', weight: 50 },
    { name: 'one-page', value: 'one-page', weight: 30 },
    { name: 'express', value: 'express', weight: 20 },
  ],
};

const flag = compileFlag(definition);
const KEYS = 1024;
/** Contexts that fail every rule and fall to the variants: the longest common path. */
const variantContexts: EvaluationContext[] = Array.from({ length: KEYS }, (_, i) => ({
  targetingKey: `user-${i}`,
  country: i % 2 === 0 ? 'US' : 'FR',
  plan: 'pro',
  email: `user-${i}@example.com`,
  appVersion: '4.9.1',
}));
/** Contexts that match the first rule. */
const firstRuleContexts: EvaluationContext[] = variantContexts.map((context) => ({ ...context, country: 'DE', plan: 'enterprise' }));

function baseline(flagKey: string, context: EvaluationContext, requestDefault: unknown): EvaluationResult {
  return {
    flagKey,
    value: context.targetingKey,
    reason: 'DEFAULT',
    variant: undefined,
    errorCode: undefined,
    errorMessage: undefined,
    disabled: undefined,
    ruleId: requestDefault as string,
  };
}

type Evaluator = (flagKey: string, context: EvaluationContext, requestDefault: unknown) => EvaluationResult;

const viaEngine: Evaluator = (flagKey, context, requestDefault) => evaluate(flag, flagKey, context, requestDefault);

let sink = 0;

function opsPerSecond(run: Evaluator, contexts: EvaluationContext[], durationMs: number): number {
  let operations = 0;
  const started = process.hrtime.bigint();
  const deadline = started + BigInt(durationMs) * 1_000_000n;
  let now = started;
  while (now < deadline) {
    for (let i = 0; i < 10_000; i++) {
      const result = run('checkout-experiment', contexts[i & (KEYS - 1)], 'control');
      sink += (result.value as string).length;
    }
    operations += 10_000;
    now = process.hrtime.bigint();
  }
  return operations / (Number(now - started) / 1e9);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function measure(name: string, run: Evaluator, contexts: EvaluationContext[]): number {
  opsPerSecond(run, contexts, 300);
  const rounds = Array.from({ length: 5 }, () => opsPerSecond(run, contexts, 400));
  const result = median(rounds);
  console.log(`${name.padEnd(40)} ${(result / 1e6).toFixed(2).padStart(7)} M ops/s  ${(1e9 / result).toFixed(0).padStart(5)} ns/op`);
  return result;
}

const reasons = new Map<string, number>();
for (const context of variantContexts) {
  const { reason } = evaluate(flag, 'checkout-experiment', context, 'control');
  reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
}
console.log(`variant contexts resolve to: ${[...reasons].map(([reason, count]) => `${reason} ${count}`).join(', ')}`);

const bare = measure('bare function call (baseline)', baseline, variantContexts);
const throughVariants = measure('evaluate: 3 rules miss, variant chosen', viaEngine, variantContexts);
const firstRule = measure('evaluate: first rule matches', viaEngine, firstRuleContexts);
console.log(`ratio to baseline: variants ${(throughVariants / bare).toFixed(3)}, first rule ${(firstRule / bare).toFixed(3)}`);
if (sink === 0) console.log('unreachable: keeps the results alive');
