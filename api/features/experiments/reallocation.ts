import { conflict, HttpError } from '../../http/errors';
import type { Sql } from '../../infra/postgres';
import { writeAudit, type AuditActor } from '../audit/writer';
import type { FlagService } from '../flags/service';
import type { Environment } from '../../domain/environments';
import type { FlagRecord, FlagRef } from '../flags/types';
import { allocationsToWeights, armsToCut, decideAllocation, seededRandom, type AllocationDecision, type AllocationPolicy, type ArmStats } from './allocation';
import type { BanditStore, RoundResult, StoredExperiment } from './store';
import type { BanditWarehouse } from './warehouse';

/** Flag changes an experiment makes are attributed to it, as a canary's are to `canary:<id>`. */
export const banditActor = (experimentId: string): AuditActor => ({ name: `bandit:${experimentId}`, userId: null });

/** Family alpha of the errors guardrail (armsToCut splits it over the pairs of arms). */
export const GUARDRAIL_ALPHA = 0.05;

/** Attempts at the flag write when someone else changed the flag between our read and write. */
const WRITE_ATTEMPTS = 3;

export type ReallocationTrigger = 'manual' | 'scheduled';

export interface ReallocationDeps {
  sql: Sql;
  store: BanditStore;
  flags: FlagService;
  warehouse: BanditWarehouse;
}

export const flagRefOf = (e: StoredExperiment): FlagRef => ({ key: e.flagKey, serviceId: e.serviceId, environment: e.environment as Environment });

export const policyOf = (e: StoredExperiment): AllocationPolicy => ({
  algorithm: e.algorithm,
  minExplorationFloor: e.minExplorationFloor,
  minSampleSizePerVariant: e.minSampleSizePerVariant,
  confidenceThreshold: e.confidenceThreshold,
  autoRolloutWinner: e.autoRolloutWinner,
});

/**
 * The weights of `flag`'s variants set to `weights`; null when its variants are no longer the
 * experiment's arms (someone added, removed or renamed one): the experiment cannot go on then.
 */
export function variantsWithWeights(flag: FlagRecord, weights: Record<string, number>): FlagRecord['variants'] | null {
  const names = flag.variants.map((v) => v.name);
  const arms = Object.keys(weights);
  if (names.length !== arms.length || !names.every((name) => name in weights)) return null;
  return flag.variants.map((v) => ({ ...v, weight: weights[v.name] }));
}

/**
 * Cut arms keep exactly the floor; the others share the rest in proportion to what the
 * allocation gave them (equally when it gave them nothing), so none falls below the floor.
 */
function withCutArms(allocations: Record<string, number>, cut: ReadonlySet<string>, floor: number): Record<string, number> {
  const names = Object.keys(allocations);
  const uncut = names.filter((name) => !cut.has(name));
  if (!cut.size || !uncut.length) return allocations;
  const rest = 1 - floor * (names.length - uncut.length);
  const uncutTotal = uncut.reduce((sum, name) => sum + allocations[name], 0);
  return Object.fromEntries(
    names.map((name) => [name, cut.has(name) ? floor : uncutTotal > 0 ? (allocations[name] / uncutTotal) * rest : rest / uncut.length]),
  );
}

/**
 * One reallocation round (docs/experiments.md "Reallocation"): manual (the route), scheduled
 * (the experiment's workflow), both the same code. Holding the experiment's round lease (rounds
 * run one at a time, across replicas) it adds the reward-API counts to the warehouse's
 * conversion counts, runs the errors guardrail, decides the allocation with the round's seeded generator, and writes the
 * weights to the flag through the one flag write path as `bandit:<id>` with the flag's version
 * (audit entry, version snapshot, stream and webhook events). A concurrent edit of the flag
 * makes that write a 409: the round reads the flag again and writes the weights onto the fresh
 * content (the other edit is kept; the weights are the experiment's while it runs), up to
 * WRITE_ATTEMPTS times. A flag whose variants no longer match the arms stops the experiment.
 */
export class BanditReallocator {
  constructor(private readonly deps: ReallocationDeps) {}

  /**
   * The experiment after the round; unchanged when it is not running; null when it no longer
   * exists. 409 when another round of it is in progress.
   */
  async run(experimentId: string, trigger: ReallocationTrigger, requestedBy?: string): Promise<StoredExperiment | null> {
    const { sql, store } = this.deps;
    const lease = await store.takeRound(sql, experimentId);
    if (!lease.taken) {
      if (lease.experiment?.status === 'running') throw conflict('A reallocation round of this experiment is in progress; try again in a moment');
      return lease.experiment;
    }
    const { experiment } = lease;
    try {
      const round = await this.decide(experiment, trigger, requestedBy);
      return await sql.begin(async (tx) => {
        await store.saveRound(tx, experiment.id, round);
        const actor = banditActor(experiment.id);
        for (const cut of round.cuts) {
          await writeAudit(tx, actor, {
            projectId: experiment.projectId,
            action: 'experiment.arm_cut',
            resourceType: 'experiment',
            resourceId: experiment.id,
            resourceName: experiment.name,
            metadata: { serviceId: experiment.serviceId, environment: experiment.environment, flagKey: experiment.flagKey, variant: cut.name, guardrail: cut.evidence },
          });
        }
        return store.find(tx, experiment.id);
      });
    } catch (error) {
      await store.releaseRound(sql, experiment.id);
      throw error;
    }
  }

  private async decide(e: StoredExperiment, trigger: ReallocationTrigger, requestedBy: string | undefined): Promise<RoundResult> {
    const scope = { projectId: e.projectId, serviceId: e.serviceId, environment: e.environment, flagKey: e.flagKey, fromMs: Date.parse(e.startedAt), toMs: Date.now() };
    const [events, errors] = await Promise.all([e.conversionEvent ? this.deps.warehouse.conversions(scope, e.conversionEvent) : Promise.resolve([]), this.deps.warehouse.errors(scope)]);
    const eventCounts = new Map(events.map((a) => [a.name, a]));
    const arms: ArmStats[] = e.arms.map((arm) => {
      const counted = eventCounts.get(arm.name);
      return { name: arm.name, trials: arm.rewardTrials + (counted?.trials ?? 0), successes: arm.rewardSuccesses + (counted?.successes ?? 0) };
    });

    const alreadyCut = new Set(e.arms.filter((a) => a.cut).map((a) => a.name));
    const armNames = new Set(e.arms.map((a) => a.name));
    const newCuts = armsToCut(
      errors.filter((a) => armNames.has(a.name)),
      GUARDRAIL_ALPHA,
    ).filter((c) => !alreadyCut.has(c.name));
    const cut = new Set([...alreadyCut, ...newCuts.map((c) => c.name)]);

    const current = Object.fromEntries(e.arms.map((a) => [a.name, a.allocation]));
    const policy = policyOf(e);
    const random = () => seededRandom(e.seed + e.rounds);
    let decision: AllocationDecision = decideAllocation(arms, current, policy, random());
    // A cut arm is never promoted: the round reallocates among the others instead.
    if (decision.promoted && decision.leader && cut.has(decision.leader)) decision = decideAllocation(arms, current, { ...policy, autoRolloutWinner: false }, random());
    const allocations = decision.promoted ? decision.allocations : withCutArms(decision.allocations, cut, e.minExplorationFloor);
    const weights = allocationsToWeights(allocations);

    const completed = decision.promoted;
    const flag = await this.writeWeights(e, weights, {
      experimentId: e.id,
      round: e.rounds + 1,
      trigger,
      ...(requestedBy ? { requestedBy } : {}),
      outcome: decision.outcome,
      arms,
      allocations: weights,
      probabilityBest: decision.probabilityBest,
      ...(newCuts.length ? { cuts: newCuts } : {}),
    });
    const base = {
      winner: decision.leader,
      arms: e.arms.map((arm) => ({
        name: arm.name,
        allocation: weights[arm.name] / 100,
        probabilityBest: decision.probabilityBest[arm.name] ?? 0,
        eventTrials: eventCounts.get(arm.name)?.trials ?? 0,
        eventSuccesses: eventCounts.get(arm.name)?.successes ?? 0,
      })),
      cuts: newCuts.map((c) => ({ name: c.name, evidence: { ...c } as Record<string, unknown> })),
    };
    if (flag === null) {
      // The arms' counts and decision are kept; the flag is left as its editor made it.
      return { ...base, arms: base.arms.map((a) => ({ ...a, allocation: current[a.name] })), status: 'stopped', statusReason: "the flag's variants no longer match the experiment's arms", flagVersion: null };
    }
    return { ...base, status: completed ? 'completed' : 'running', statusReason: completed ? `winner ${decision.leader} promoted to 100%` : null, flagVersion: flag.version };
  }

  /** The flag with the weights written (or already so); null when its variants are no longer the arms. */
  private async writeWeights(e: StoredExperiment, weights: Record<string, number>, metadata: Record<string, unknown>): Promise<FlagRecord | null> {
    const ref = flagRefOf(e);
    for (let attempt = 1; ; attempt++) {
      const flag = await this.deps.flags.get(ref);
      if (!flag) throw conflict(`The flag "${e.flagKey}" of the experiment no longer exists`);
      const variants = variantsWithWeights(flag, weights);
      if (!variants) return null;
      try {
        // The experiment passed the change policy when it started; its rounds follow (docs/change-requests.md#the-gate).
        return await this.deps.flags.update(banditActor(e.id), ref, { variants }, flag.version, { permit: 'release-safety', metadata: { bandit: metadata } });
      } catch (error) {
        if (!(error instanceof HttpError && error.status === 409) || attempt >= WRITE_ATTEMPTS) throw error;
      }
    }
  }
}
