import { performance } from 'node:perf_hooks';
import { notFound, validationFailed } from '../../http/errors';
import type { ContextRing } from '../evaluation/contexts';
import { EvaluationBudget, evaluate, type CompiledFlag, type EvaluationContext, type EvaluationResult, type FlagDefinition } from '../evaluation/engine/index';
import type { SnapshotStore } from '../evaluation/snapshots';
import type { Environment } from '../../domain/environments';
import type { FlagRecord, FlagTargetingRuleInput, FlagVariant } from '../flags/types';
import { canonicalJson, flagContentProblems } from '../flags/validation';
import type { ContextAttributeFilter } from './attributes';
import type { RecentContextWarehouse } from './warehouse';

export const DEFAULT_COHORT_SIZE = 1_000;
export const MAX_COHORT_SIZE = 10_000;
/** Changed contexts shown as examples, the first ones of the cohort (most recently seen first). */
export const MAX_EXAMPLES = 10;
/** Contexts evaluated between two yields to the event loop, so a large cohort never holds requests up. */
const CONTEXTS_PER_TURN = 500;

/** The fields of a flag a candidate may change: those evaluation reads. */
export interface CandidateFlag {
  enabled?: boolean;
  defaultValue?: unknown;
  variants?: FlagVariant[];
  targeting?: FlagTargetingRuleInput[];
}

/**
 * What decided a result, as byRule names it: a rule by its id; the other outcomes by names no
 * generated rule id has (docs/simulate.md): `$variant:<name>`, `$default`, `$disabled`, `$error`.
 */
export const OUTCOME_KINDS = ['rule', 'variant', 'default', 'disabled', 'error'] as const;
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

export interface Transition {
  from: unknown;
  to: unknown;
  count: number;
}

export interface OutcomeCount {
  ruleId: string;
  outcome: OutcomeKind;
  before: number;
  after: number;
}

export interface Example {
  targetingKey: string;
  before: unknown;
  after: unknown;
  beforeRuleId: string;
  afterRuleId: string;
}

export interface Simulation {
  flagKey: string;
  cohortSize: number;
  evaluated: number;
  changed: number;
  unchanged: number;
  transitions: Transition[];
  byRule: OutcomeCount[];
  examples: Example[];
  sources: { ring: number; warehouse: number };
}

export interface SimulationRequest {
  serviceId: string;
  environment: Environment;
  flagKey: string;
  cohortSize: number;
  candidate: CandidateFlag;
}

/**
 * Simulate (docs/simulate.md): the current flag (evaluation's snapshot) and a candidate
 * (the current flag with `candidateFlag`'s fields over it, validated as a flag update and
 * compiled as the snapshots compile theirs) evaluated by the serving engine over recent real
 * contexts of the service and environment: this instance's context ring first, then the
 * recent-contexts warehouse, one context per targeting key. Nothing is written: the engine is
 * called directly, so no evaluation event, ring entry or warehouse row comes of it.
 */
export class SimulateService {
  constructor(
    private readonly deps: {
      snapshots: SnapshotStore;
      ring: ContextRing;
      warehouse: RecentContextWarehouse;
      /** The warehouse's filter: ring contexts replay exactly as stored ones would. */
      filter: ContextAttributeFilter;
      /** Work one evaluation may do, as for a serving request (EVAL_BUDGET_*). */
      workBudget: { conditions: number; regexMs: number };
    },
  ) {}

  async simulate(request: SimulationRequest): Promise<Simulation> {
    const { serviceId, environment, flagKey, cohortSize } = request;
    const service = await this.deps.snapshots.resolve(serviceId);
    const entry = service?.environments[environment].get(flagKey);
    if (service === null || service === undefined || entry === undefined) throw notFound('Flag');
    const definition = candidateDefinition(entry.record, request.candidate);
    const candidate = this.deps.snapshots.compile(service.projectId, definition);
    // Validation passed, so what compile still sets aside is a project reference (an in_cohort
    // naming no cohort of the project): a write would refuse it, and a replay would hide it.
    const problems = request.candidate.targeting ? candidate.issues.filter((issue) => issue.ruleIndex !== undefined) : [];
    if (problems.length) throw validationFailed(problems.map((issue) => ({ path: `body.candidateFlag.targeting.${issue.ruleIndex}`, message: issue.message })));
    const cohort = await this.cohort(serviceId, environment, cohortSize);

    const tally = new Tally(entry.record, definition);
    for (let i = 0; i < cohort.contexts.length; i++) {
      if (i > 0 && i % CONTEXTS_PER_TURN === 0) await nextTurn();
      const context = cohort.contexts[i];
      tally.add(context.targetingKey, this.evaluate(entry.compiled, flagKey, context), this.evaluate(candidate, flagKey, context));
    }
    return { flagKey, cohortSize, ...tally.result(), sources: { ring: cohort.fromRing, warehouse: cohort.contexts.length - cohort.fromRing } };
  }

  /**
   * How many recent real contexts a change would answer differently (a change request's impact,
   * docs/change-requests.md#impact): `after` over the current flag, or, when the flag appears or
   * disappears (`after` null, or no current flag), every context of the cohort.
   */
  async impact(ref: { serviceId: string; environment: Environment; flagKey: string }, after: CandidateFlag | null, cohortSize: number): Promise<{ changed: number; evaluated: number }> {
    const service = await this.deps.snapshots.resolve(ref.serviceId);
    const exists = service?.environments[ref.environment].get(ref.flagKey) !== undefined;
    if (!exists || after === null) {
      const { contexts } = await this.cohort(ref.serviceId, ref.environment, cohortSize);
      return { changed: contexts.length, evaluated: contexts.length };
    }
    const { changed, evaluated } = await this.simulate({ ...ref, cohortSize, candidate: after });
    return { changed, evaluated };
  }

  private evaluate(flag: CompiledFlag, flagKey: string, context: ReplayContext): EvaluationResult {
    // No request default: an error answers null, as REST evaluation does without one.
    return evaluate(flag, flagKey, context, null, { budget: new EvaluationBudget(this.deps.workBudget, clock) });
  }

  /** Up to `size` distinct targeting keys, most recently seen first: the ring's, then the warehouse's. */
  private async cohort(serviceId: string, environment: Environment, size: number): Promise<{ contexts: ReplayContext[]; fromRing: number }> {
    const contexts: ReplayContext[] = [];
    const seen = new Set<string>();
    for (const summary of this.deps.ring.summaries(serviceId, environment)) {
      if (contexts.length === size) break;
      seen.add(summary.targetingKey);
      contexts.push({ ...this.deps.filter.toAttributes(summary.attributes), targetingKey: summary.targetingKey });
    }
    const fromRing = contexts.length;
    // The ring's keys may be among the warehouse's latest `size`; what is left still fills the cohort when the warehouse can.
    if (contexts.length < size) {
      for (const stored of await this.deps.warehouse.latest(serviceId, environment, size)) {
        if (contexts.length === size) break;
        if (seen.has(stored.targetingKey)) continue;
        seen.add(stored.targetingKey);
        contexts.push({ ...stored.attributes, targetingKey: stored.targetingKey });
      }
    }
    return { contexts, fromRing };
  }
}

type ReplayContext = EvaluationContext & { targetingKey: string };

const clock = () => performance.now();
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The current flag with the candidate's fields over it; 400 naming the field when the candidate is not a valid update of this flag. */
function candidateDefinition(record: FlagRecord, candidate: CandidateFlag): FlagDefinition {
  const problems = flagContentProblems(candidate, record.type, 'body.candidateFlag.');
  if (problems.length) throw validationFailed(problems);
  return {
    key: record.key,
    type: record.type,
    enabled: candidate.enabled ?? record.enabled,
    defaultValue: candidate.defaultValue !== undefined ? candidate.defaultValue : record.defaultValue,
    variants: candidate.variants ?? record.variants,
    // A new rule has no id until it is written; byRule names it by its place.
    targeting: candidate.targeting ? candidate.targeting.map((rule, i) => ({ ...rule, id: rule.id ?? `$new:${i}` })) : record.targeting,
  };
}

function outcomeOf(result: EvaluationResult): { outcome: OutcomeKind; ruleId: string } {
  switch (result.reason) {
    case 'TARGETING_MATCH':
      return { outcome: 'rule', ruleId: result.ruleId ?? '' };
    case 'VARIANT':
      return { outcome: 'variant', ruleId: `$variant:${result.variant ?? ''}` };
    case 'DEFAULT':
      return result.disabled ? { outcome: 'disabled', ruleId: '$disabled' } : { outcome: 'default', ruleId: '$default' };
    default:
      return { outcome: 'error', ruleId: '$error' };
  }
}

const outcomeKey = (o: { outcome: OutcomeKind; ruleId: string }) => `${o.outcome}\n${o.ruleId}`;
const valueKey = (value: unknown) => (value === undefined ? 'undefined' : canonicalJson(value));

/** Counts of one simulation: value transitions, outcomes before and after, the first examples. */
class Tally {
  private evaluated = 0;
  private changed = 0;
  private readonly transitions = new Map<string, Transition>();
  /** Every rule and variant of both versions (zero counts say "matches nobody"), then other outcomes as they occur. */
  private readonly outcomes = new Map<string, OutcomeCount>();
  private readonly examples: Example[] = [];

  constructor(current: FlagDefinition, candidate: FlagDefinition) {
    for (const flag of [current, candidate]) {
      for (const rule of flag.targeting) this.outcome({ outcome: 'rule', ruleId: rule.id });
    }
    for (const flag of [current, candidate]) {
      for (const variant of flag.variants) this.outcome({ outcome: 'variant', ruleId: `$variant:${variant.name}` });
    }
  }

  add(targetingKey: string, before: EvaluationResult, after: EvaluationResult): void {
    this.evaluated++;
    const was = outcomeOf(before);
    const is = outcomeOf(after);
    this.outcome(was).before++;
    this.outcome(is).after++;
    const from = valueKey(before.value);
    const to = valueKey(after.value);
    if (from === to) return;
    this.changed++;
    const key = `${from}\n${to}`;
    const transition = this.transitions.get(key);
    if (transition) transition.count++;
    else this.transitions.set(key, { from: before.value, to: after.value, count: 1 });
    if (this.examples.length < MAX_EXAMPLES) {
      this.examples.push({ targetingKey, before: before.value, after: after.value, beforeRuleId: was.ruleId, afterRuleId: is.ruleId });
    }
  }

  result() {
    return {
      evaluated: this.evaluated,
      changed: this.changed,
      unchanged: this.evaluated - this.changed,
      transitions: [...this.transitions.values()].sort((a, b) => b.count - a.count),
      // Seeded rules and variants keep their order; the rest follow in a fixed order.
      byRule: [...this.outcomes.values()].sort((a, b) => OUTCOME_KINDS.indexOf(a.outcome) - OUTCOME_KINDS.indexOf(b.outcome)),
      examples: this.examples,
    };
  }

  private outcome(o: { outcome: OutcomeKind; ruleId: string }): OutcomeCount {
    const key = outcomeKey(o);
    let count = this.outcomes.get(key);
    if (count === undefined) {
      count = { ...o, before: 0, after: 0 };
      this.outcomes.set(key, count);
    }
    return count;
  }
}
