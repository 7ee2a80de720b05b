import { randomInt } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/common';
import { conflict, notFound, validationFailed, type FieldProblem } from '../../http/errors';
import { newId } from '../../infra/ids';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { startWorkflow, type Temporal } from '../../infra/temporal';
import { writeAudit, type AuditActor } from '../audit/writer';
import type { FlagService } from '../flags/service';
import type { FlagRef } from '../flags/types';
import { allocationsToWeights } from './allocation';
import { BANDIT_REALLOCATION, banditEndedSignal, banditWorkflowId } from '../../../workflows/messages';
import { banditActor, variantsWithWeights, type BanditReallocator } from './reallocation';
import type { ExperimentInput, ExperimentRecord } from './schema';
import type { BanditStore, StoredExperiment } from './store';

export interface BanditServiceDeps {
  sql: Sql;
  store: BanditStore;
  flags: FlagService;
  reallocator: BanditReallocator;
  temporal: Temporal;
  logger: Logger;
}

/** Seeds are drawn below 2^31 so seed + round stays an exact 32-bit generator seed for years of rounds. */
const SEED_LIMIT = 2 ** 31;

export function toRecord(e: StoredExperiment): ExperimentRecord {
  // Internal bookkeeping stays out of the answer.
  const { flagId: _flagId, arms, flagVersion: _flagVersion, workflowId: _workflowId, ...fields } = e;
  return {
    ...fields,
    variants: arms.map((arm) => {
      const trials = arm.rewardTrials + arm.eventTrials;
      const successes = arm.rewardSuccesses + arm.eventSuccesses;
      return {
        name: arm.name,
        allocation: arm.allocation,
        trials,
        successes,
        conversionRate: trials > 0 ? successes / trials : 0,
        probabilityBest: arm.probabilityBest,
        cut: arm.cut ? { ...arm.cut.evidence, at: arm.cut.at } : null,
        sources: { rewards: { trials: arm.rewardTrials, successes: arm.rewardSuccesses }, events: { trials: arm.eventTrials, successes: arm.eventSuccesses } },
      };
    }),
  };
}

/**
 * Bandit experiments (docs/experiments.md). The record lives in Postgres
 * (one running per flag, service and environment); each running experiment has a workflow that
 * reallocates on its interval; rewards are counters. Authorization is the routes'.
 */
export class BanditService {
  constructor(private readonly deps: BanditServiceDeps) {}

  /**
   * Validates the flag (exists, at least two variants, floor * arms <= 1), inserts the
   * experiment with equal allocations (a second running one on the flag is a 409), writes the
   * equal weights to the flag as `bandit:<id>`, and starts the experiment's workflow. When the
   * flag write or the start fails the experiment is stopped with the reason and the error answers.
   */
  async create(actor: AuditActor, input: ExperimentInput): Promise<ExperimentRecord> {
    const ref: FlagRef = { key: input.flagKey, serviceId: input.serviceId, environment: input.environment };
    const service = await this.deps.flags.findService(input.serviceId);
    const problems: FieldProblem[] = [];
    if (service && service.projectId !== input.projectId) problems.push({ path: 'body.serviceId', message: 'is not a service of projectId' });
    if (problems.length) throw validationFailed(problems);
    const flag = await this.deps.flags.get(ref);
    if (!flag) throw notFound(`Flag "${input.flagKey}" in ${input.environment}`);
    if (flag.variants.length < 2) problems.push({ path: 'body.flagKey', message: `the flag needs at least 2 variants (it has ${flag.variants.length})` });
    if (input.minExplorationFloor * flag.variants.length > 1) {
      problems.push({ path: 'body.minExplorationFloor', message: `times the ${flag.variants.length} variants exceeds 1; at most ${1 / flag.variants.length}` });
    }
    if (problems.length) throw validationFailed(problems);

    const id = newId('exp');
    const equal = Object.fromEntries(flag.variants.map((v) => [v.name, 1 / flag.variants.length]));
    const weights = allocationsToWeights(equal);
    await this.deps.sql.begin(async (tx) => {
      const scope = { id, name: input.name, projectId: input.projectId, serviceId: input.serviceId, environment: input.environment, flagKey: input.flagKey };
      const settings = {
        algorithm: input.algorithm,
        minExplorationFloor: input.minExplorationFloor,
        minSampleSizePerVariant: input.minSampleSizePerVariant,
        confidenceThreshold: input.confidenceThreshold,
        autoRolloutWinner: input.autoRolloutWinner,
        conversionEvent: input.conversionEvent ?? null,
        reallocationIntervalMinutes: input.reallocationIntervalMinutes,
      };
      await this.deps.store.insert(tx, {
        ...scope,
        ...settings,
        flagId: flag.id,
        seed: input.seed ?? randomInt(SEED_LIMIT),
        flagVersion: flag.version,
        workflowId: banditWorkflowId(id),
        createdByActor: actor.name,
        arms: flag.variants.map((v) => ({ name: v.name, allocation: weights[v.name] / 100 })),
      });
      await writeAudit(tx, actor, this.auditEntry(scope, 'experiment.create', settings));
    });

    try {
      const variants = variantsWithWeights(flag, weights)!;
      // Written only if the flag is still the version validated above (409 otherwise).
      await this.deps.flags.update(banditActor(id), ref, { variants }, flag.version, { metadata: { bandit: { experimentId: id, round: 0, trigger: 'start', allocations: weights } } });
      await startWorkflow(this.deps.temporal, BANDIT_REALLOCATION, { experimentId: id, intervalMinutes: input.reallocationIntervalMinutes }, { workflowId: banditWorkflowId(id) });
    } catch (error) {
      await this.deps.store.end(this.deps.sql, id, 'stopped', `the experiment could not start: ${(error as Error).message}`);
      throw error;
    }
    return toRecord((await this.deps.store.find(this.deps.sql, id))!);
  }

  async list(projectIds: string[], serviceId: string | undefined, limit: number): Promise<ExperimentRecord[]> {
    return (await this.deps.store.list(this.deps.sql, projectIds, serviceId, limit)).map(toRecord);
  }

  async get(id: string): Promise<ExperimentRecord> {
    return toRecord(await this.require(id));
  }

  /** Counts one trial (and a success when converted) for the arm; 400 for an unknown arm, 409 when the experiment ended. */
  async reward(id: string, variantName: string, converted: boolean): Promise<ExperimentRecord> {
    const refused = await this.deps.store.addReward(this.deps.sql, id, variantName, converted);
    if (refused === 'unknown_variant') {
      await this.require(id);
      throw validationFailed([{ path: 'body.variantName', message: `the experiment has no variant "${variantName}"` }]);
    }
    if (refused === 'not_running') throw conflict('The experiment has ended; rewards are no longer counted');
    return this.get(id);
  }

  /** A reallocation round now (the same as the scheduled one); 409 when the experiment ended. */
  async reallocate(actor: AuditActor, id: string): Promise<ExperimentRecord> {
    const before = await this.require(id);
    if (before.status !== 'running') throw conflict(`The experiment has ended (${before.status})`);
    const after = await this.deps.reallocator.run(id, 'manual', actor.name);
    if (!after) throw notFound('Experiment');
    await this.audit(actor, after, 'experiment.reallocate', { round: after.rounds, status: after.status, winner: after.winner });
    if (after.status !== 'running') await this.signalEnded(after);
    return toRecord(after);
  }

  /** Ends a running experiment by hand: the flag keeps the weights it has; the workflow ends. */
  async stop(actor: AuditActor, id: string, reason: string): Promise<ExperimentRecord> {
    const experiment = await this.require(id);
    const stopped = await this.deps.sql.begin(async (tx) => {
      const ended = await this.deps.store.end(tx, id, 'stopped', reason);
      if (ended) await writeAudit(tx, actor, this.auditEntry(experiment, 'experiment.stop', { reason }));
      return ended;
    });
    if (!stopped) throw conflict(`The experiment has ended (${experiment.status})`);
    const after = await this.require(id);
    await this.signalEnded(after);
    return toRecord(after);
  }

  /** The workflow returns at once instead of at its next wake-up; one already gone is fine. */
  private async signalEnded(e: StoredExperiment): Promise<void> {
    try {
      await this.deps.temporal.bounded(() => this.deps.temporal.client.workflow.getHandle(e.workflowId).signal(banditEndedSignal, e.status === 'completed' ? 'completed' : 'stopped'));
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return;
      this.deps.logger.warn({ err: error, experimentId: e.id }, 'could not signal the bandit workflow; it ends at its next round');
    }
  }

  private async require(id: string): Promise<StoredExperiment> {
    const experiment = await this.deps.store.find(this.deps.sql, id);
    if (!experiment) throw notFound('Experiment');
    return experiment;
  }

  private audit(actor: AuditActor, e: StoredExperiment, action: `experiment.${string}`, metadata: Record<string, unknown>) {
    return this.deps.sql.begin((tx) => writeAudit(tx, actor, this.auditEntry(e, action, metadata)));
  }

  private auditEntry(e: Pick<StoredExperiment, 'id' | 'name' | 'projectId' | 'serviceId' | 'environment' | 'flagKey'>, action: `experiment.${string}`, metadata: Record<string, unknown>) {
    return {
      projectId: e.projectId,
      action,
      resourceType: 'experiment',
      resourceId: e.id,
      resourceName: e.name,
      metadata: { serviceId: e.serviceId, environment: e.environment, flagKey: e.flagKey, ...metadata },
    };
  }
}
