import type { Sql } from '../../infra/postgres';
import type { Queryable } from '../../infra/postgres';
import type { BanditAlgorithm } from './allocation';

export const EXPERIMENT_STATUSES = ['running', 'completed', 'stopped'] as const;
export type ExperimentStatus = (typeof EXPERIMENT_STATUSES)[number];

/** Why and how the errors guardrail cut an arm (armsToCut's finding, stored as given). */
export interface ArmCut {
  at: string;
  evidence: Record<string, unknown>;
}

/** One arm as stored (migration 0064): both counter sources apart, the record adds them. */
export interface StoredArm {
  name: string;
  position: number;
  allocation: number;
  probabilityBest: number;
  rewardTrials: number;
  rewardSuccesses: number;
  eventTrials: number;
  eventSuccesses: number;
  cut: ArmCut | null;
}

export interface StoredExperiment {
  id: string;
  projectId: string;
  flagId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
  name: string;
  algorithm: BanditAlgorithm;
  status: ExperimentStatus;
  statusReason: string | null;
  winner: string | null;
  minExplorationFloor: number;
  minSampleSizePerVariant: number;
  confidenceThreshold: number;
  autoRolloutWinner: boolean;
  conversionEvent: string | null;
  reallocationIntervalMinutes: number;
  seed: number;
  rounds: number;
  flagVersion: number | null;
  lastReallocatedAt: string | null;
  workflowId: string;
  startedAt: string;
  endedAt: string | null;
  createdAt: string;
  updatedAt: string;
  arms: StoredArm[];
}

interface ExperimentRow {
  id: string;
  project_id: string;
  flag_id: string;
  service_id: string;
  environment: string;
  flag_key: string;
  name: string;
  algorithm: BanditAlgorithm;
  status: ExperimentStatus;
  status_reason: string | null;
  winner: string | null;
  min_exploration_floor: number;
  min_sample_size_per_variant: number;
  confidence_threshold: number;
  auto_rollout_winner: boolean;
  conversion_event: string | null;
  reallocation_interval_minutes: number;
  seed: string;
  rounds: number;
  flag_version: number | null;
  last_reallocated_at: Date | null;
  workflow_id: string;
  started_at: Date;
  ended_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

interface ArmRow {
  experiment_id: string;
  name: string;
  position: number;
  allocation: number;
  probability_best: number;
  reward_trials: string;
  reward_successes: string;
  event_trials: string;
  event_successes: string;
  cut_at: Date | null;
  cut_evidence: Record<string, unknown> | null;
}

const toArm = (r: ArmRow): StoredArm => ({
  name: r.name,
  position: r.position,
  allocation: r.allocation,
  probabilityBest: r.probability_best,
  rewardTrials: Number(r.reward_trials),
  rewardSuccesses: Number(r.reward_successes),
  eventTrials: Number(r.event_trials),
  eventSuccesses: Number(r.event_successes),
  cut: r.cut_at ? { at: r.cut_at.toISOString(), evidence: r.cut_evidence ?? {} } : null,
});

const toExperiment = (r: ExperimentRow, arms: ArmRow[]): StoredExperiment => ({
  id: r.id,
  projectId: r.project_id,
  flagId: r.flag_id,
  serviceId: r.service_id,
  environment: r.environment,
  flagKey: r.flag_key,
  name: r.name,
  algorithm: r.algorithm,
  status: r.status,
  statusReason: r.status_reason,
  winner: r.winner,
  minExplorationFloor: r.min_exploration_floor,
  minSampleSizePerVariant: r.min_sample_size_per_variant,
  confidenceThreshold: r.confidence_threshold,
  autoRolloutWinner: r.auto_rollout_winner,
  conversionEvent: r.conversion_event,
  reallocationIntervalMinutes: r.reallocation_interval_minutes,
  seed: Number(r.seed),
  rounds: r.rounds,
  flagVersion: r.flag_version,
  lastReallocatedAt: r.last_reallocated_at?.toISOString() ?? null,
  workflowId: r.workflow_id,
  startedAt: r.started_at.toISOString(),
  endedAt: r.ended_at?.toISOString() ?? null,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
  arms: arms
    .filter((a) => a.experiment_id === r.id)
    .sort((a, b) => a.position - b.position)
    .map(toArm),
});

export type NewExperiment = Pick<
  StoredExperiment,
  | 'id'
  | 'projectId'
  | 'flagId'
  | 'serviceId'
  | 'environment'
  | 'flagKey'
  | 'name'
  | 'algorithm'
  | 'minExplorationFloor'
  | 'minSampleSizePerVariant'
  | 'confidenceThreshold'
  | 'autoRolloutWinner'
  | 'conversionEvent'
  | 'reallocationIntervalMinutes'
  | 'seed'
  | 'flagVersion'
  | 'workflowId'
> & { createdByActor: string; arms: { name: string; allocation: number }[] };

/** What one reallocation round leaves: the arms' new allocations, P(best) and warehouse counts. */
export interface RoundResult {
  status: ExperimentStatus;
  statusReason: string | null;
  winner: string | null;
  flagVersion: number | null;
  arms: { name: string; allocation: number; probabilityBest: number; eventTrials: number; eventSuccesses: number }[];
  cuts: { name: string; evidence: Record<string, unknown> }[];
}

/** How long a round may hold its experiment before another may take it (a round takes well under a second). */
export const ROUND_LEASE_SECONDS = 120;

/** Why a reward was not counted: the experiment is not running, or it has no such arm. */
export type RewardRefusal = 'not_running' | 'unknown_variant';

export class BanditStore {
  constructor(private readonly sql: Sql) {}

  /** Inserts a running experiment and its arms; a unique violation (23505) when the flag already has a running one. */
  async insert(e: NewExperiment, db: Queryable = this.sql): Promise<void> {
    await db`
      INSERT INTO bandit_experiments (id, project_id, flag_id, service_id, environment, flag_key, name, algorithm, status,
        min_exploration_floor, min_sample_size_per_variant, confidence_threshold, auto_rollout_winner, conversion_event,
        reallocation_interval_minutes, seed, flag_version, workflow_id, created_by_actor)
      VALUES (${e.id}, ${e.projectId}, ${e.flagId}, ${e.serviceId}, ${e.environment}, ${e.flagKey}, ${e.name}, ${e.algorithm}, 'running',
        ${e.minExplorationFloor}, ${e.minSampleSizePerVariant}, ${e.confidenceThreshold}, ${e.autoRolloutWinner}, ${e.conversionEvent},
        ${e.reallocationIntervalMinutes}, ${e.seed}, ${e.flagVersion}, ${e.workflowId}, ${e.createdByActor})`;
    const arms = e.arms.map((a, position) => ({ experiment_id: e.id, name: a.name, position, allocation: a.allocation }));
    await db`INSERT INTO bandit_experiment_variants ${db(arms, 'experiment_id', 'name', 'position', 'allocation')}`;
  }

  async find(id: string, db: Queryable = this.sql): Promise<StoredExperiment | null> {
    const [row] = await db<ExperimentRow[]>`SELECT * FROM bandit_experiments WHERE id = ${id}`;
    if (!row) return null;
    return toExperiment(row, await this.armsOf([id], db));
  }

  /**
   * Takes a running experiment's round lease for ROUND_LEASE_SECONDS (saveRound or releaseRound
   * gives it back; a crashed round's lapses): the experiment when taken; otherwise, as it is
   * (null when gone), because it has ended or another round holds it.
   */
  async takeRound(id: string): Promise<{ taken: true; experiment: StoredExperiment } | { taken: false; experiment: StoredExperiment | null }> {
    const [row] = await this.sql<ExperimentRow[]>`
      UPDATE bandit_experiments SET round_lease_until = now() + make_interval(secs => ${ROUND_LEASE_SECONDS})
      WHERE id = ${id} AND status = 'running' AND (round_lease_until IS NULL OR round_lease_until < now())
      RETURNING *`;
    if (row) return { taken: true, experiment: toExperiment(row, await this.armsOf([id], this.sql)) };
    return { taken: false, experiment: await this.find(id) };
  }

  async releaseRound(id: string): Promise<void> {
    await this.sql`UPDATE bandit_experiments SET round_lease_until = NULL WHERE id = ${id}`;
  }

  async projectOf(id: string): Promise<string | null> {
    const [row] = await this.sql<{ project_id: string }[]>`SELECT project_id FROM bandit_experiments WHERE id = ${id}`;
    return row?.project_id ?? null;
  }

  /** Experiments of the given projects (a service's when serviceId is given), newest first. */
  async list(projectIds: string[], serviceId: string | undefined, limit: number): Promise<StoredExperiment[]> {
    if (!projectIds.length) return [];
    const rows = await this.sql<ExperimentRow[]>`
      SELECT * FROM bandit_experiments
      WHERE project_id = ANY(${projectIds}) ${serviceId === undefined ? this.sql`` : this.sql`AND service_id = ${serviceId}`}
      ORDER BY created_at DESC, id DESC LIMIT ${limit}`;
    const arms = await this.armsOf(
      rows.map((r) => r.id),
      this.sql,
    );
    return rows.map((r) => toExperiment(r, arms));
  }

  /**
   * Counts one reward on a running experiment's arm, in one statement (concurrent rewards never
   * lose a count, and a round in progress does not block them); the refusal when nothing counted.
   */
  async addReward(id: string, variantName: string, converted: boolean): Promise<RewardRefusal | null> {
    const counted = await this.sql`
      UPDATE bandit_experiment_variants v
      SET reward_trials = v.reward_trials + 1, reward_successes = v.reward_successes + ${converted ? 1 : 0}
      FROM bandit_experiments e
      WHERE e.id = v.experiment_id AND v.experiment_id = ${id} AND v.name = ${variantName} AND e.status = 'running'`;
    if (counted.count > 0) return null;
    const [arm] = await this.sql`SELECT 1 FROM bandit_experiment_variants WHERE experiment_id = ${id} AND name = ${variantName}`;
    return arm ? 'not_running' : 'unknown_variant';
  }

  /**
   * Writes a round's outcome and gives the lease back. A stop that came during the round stays:
   * the status, its reason and the end time change only while the experiment still runs.
   */
  async saveRound(id: string, round: RoundResult, tx: Queryable): Promise<void> {
    const ended = round.status !== 'running';
    await tx`
      UPDATE bandit_experiments SET rounds = rounds + 1, winner = ${round.winner},
        status = CASE WHEN status = 'running' THEN ${round.status} ELSE status END,
        status_reason = CASE WHEN status = 'running' THEN ${round.statusReason} ELSE status_reason END,
        ended_at = CASE WHEN status = 'running' THEN ${ended ? tx`now()` : tx`NULL::timestamptz`} ELSE ended_at END,
        flag_version = coalesce(${round.flagVersion}, flag_version), last_reallocated_at = now(), updated_at = now(), round_lease_until = NULL
      WHERE id = ${id}`;
    for (const arm of round.arms) {
      await tx`
        UPDATE bandit_experiment_variants SET allocation = ${arm.allocation}, probability_best = ${arm.probabilityBest},
          event_trials = ${arm.eventTrials}, event_successes = ${arm.eventSuccesses}
        WHERE experiment_id = ${id} AND name = ${arm.name}`;
    }
    for (const cut of round.cuts) {
      await tx`
        UPDATE bandit_experiment_variants SET cut_at = now(), cut_evidence = ${tx.json(cut.evidence as never)}
        WHERE experiment_id = ${id} AND name = ${cut.name} AND cut_at IS NULL`;
    }
  }

  /** Ends a running experiment (stop, or its flag or workflow is gone); false when it was not running. */
  async end(id: string, status: Exclude<ExperimentStatus, 'running'>, reason: string, tx: Queryable = this.sql): Promise<boolean> {
    const ended = await tx`
      UPDATE bandit_experiments SET status = ${status}, status_reason = ${reason}, ended_at = now(), updated_at = now()
      WHERE id = ${id} AND status = 'running'`;
    return ended.count > 0;
  }

  private async armsOf(ids: string[], db: Queryable): Promise<ArmRow[]> {
    if (!ids.length) return [];
    return db<ArmRow[]>`SELECT * FROM bandit_experiment_variants WHERE experiment_id = ANY(${ids}) ORDER BY experiment_id, position`;
  }
}
