import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpError, conflict, isUniqueViolation, notFound, validationFailed } from '../../http/errors';
import { newId } from '../../infra/ids';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { startWorkflow, type Temporal } from '../../infra/temporal';
import { writeAudit, type AuditActor } from '../audit/writer';
import type { FlagService } from '../flags/service';
import type { FlagRef } from '../flags/types';
import { flagContentProblems } from '../flags/validation';
import {
  CANARY_PIPELINE,
  canaryAbortSignal,
  canaryAdvanceSignal,
  canaryStateQuery,
  canaryWorkflowId,
  type CanaryConfig,
  type CanaryGate,
  type CanaryHealth,
  type CanaryStage,
  type CanaryState,
  type CanaryStatus,
  type CanaryTarget,
} from '../../../workflows/messages';
import { INSERTED_RULE_ID, withRollout } from './rules';
import { runCanaryGate } from './gate';
import { ACTIVE_STATUSES, type CanaryPipeline, type CanaryStore } from './store';
import type { CanaryWarehouse } from './warehouse';

/**
 * The canary configuration with its optional fields (docs/canary.md), as the start route validated
 * it.
 */
export interface CanaryStartInput extends Omit<CanaryConfig, 'maxWaitMinutes'> {
  maxWaitMinutes?: number;
  ruleId?: string;
  value?: unknown;
}

/** The record the API answers (docs/canary.md). */
export interface CanaryRecord {
  id: string;
  flagKey: string;
  serviceId: string;
  environment: string;
  ruleId: string;
  status: CanaryStatus;
  statusReason: string | null;
  config: CanaryConfig;
  currentStage: CanaryStage | null;
  completedStages: CanaryStage[];
  remainingSoakSeconds: number;
  health: CanaryHealth;
  createdAt: string;
  updatedAt: string;
}

/** How long advance and abort wait for the workflow to act on their signal before answering. */
const SETTLE_MS = 10_000;

/** A pipeline may not have more stages than this (one flag version and one soak each). */
export const MAX_STAGES = 100;

export interface CanaryServiceDeps {
  sql: Sql;
  store: CanaryStore;
  flags: FlagService;
  warehouse: CanaryWarehouse;
  temporal: Temporal;
  logger: Logger;
}

/** How long a start waits for the previous pipeline's workflow to finish before trying once more. */
const PREVIOUS_RUN_WAIT_MS = 15_000;

const activeConflict = (ref: FlagRef) => conflict(`Flag "${ref.key}" already has an active canary pipeline in ${ref.environment}`);

/**
 * Canary pipelines (docs/canary.md): the record lives in Postgres (one active per flag,
 * service and environment), the pipeline itself is the canaryPipeline workflow. Start inserts
 * the record (a second concurrent start hits the partial unique index: 409) and starts the
 * workflow; GET answers the workflow's query while it runs and the record otherwise; advance and
 * abort are signals. Authorization is the routes' (flags:read / flags:write on the service).
 */
export class CanaryService {
  constructor(private readonly deps: CanaryServiceDeps) {}

  async start(actor: AuditActor, grant: { projectId: string; orgId: string }, ref: FlagRef, input: CanaryStartInput): Promise<CanaryRecord> {
    const flag = await this.deps.flags.get(ref);
    if (!flag) throw notFound(`Flag "${ref.key}"`);
    // A running pipeline may already have put its rule in the flag: say it is running (409)
    // rather than judging the flag it changed (400). The unique index settles exact races.
    const running = await this.deps.store.activeOrLatest(ref.serviceId, ref.environment, ref.key);
    if (running && ACTIVE_STATUSES.includes(running.status)) throw activeConflict(ref);
    const problems: { path: string; message: string }[] = [];
    if (input.targetRolloutPercent < input.initialRolloutPercent) problems.push({ path: 'body.targetRolloutPercent', message: 'must be at least initialRolloutPercent' });
    const stages = Math.ceil((input.targetRolloutPercent - input.initialRolloutPercent) / input.rampStepPercent) + 1;
    if (stages > MAX_STAGES) problems.push({ path: 'body.rampStepPercent', message: `gives ${stages} stages; at most ${MAX_STAGES}` });
    let ruleId: string;
    let insertRuleValue: string | undefined;
    if (input.ruleId !== undefined) {
      if (input.value !== undefined) problems.push({ path: 'body.value', message: 'give either ruleId (an existing rule) or value (a new rule), not both' });
      if (!flag.targeting.some((r) => r.id === input.ruleId)) problems.push({ path: 'body.ruleId', message: `the flag has no rule "${input.ruleId}"` });
      ruleId = input.ruleId;
    } else {
      ruleId = INSERTED_RULE_ID;
      if (flag.targeting.some((r) => r.id === ruleId)) problems.push({ path: 'body.ruleId', message: `the flag already has a rule "${ruleId}": name it as ruleId to ramp it` });
      const value = input.value ?? (flag.type === 'boolean' ? true : undefined);
      if (value === undefined) problems.push({ path: 'body.value', message: `required for a ${flag.type} flag without ruleId` });
      else {
        insertRuleValue = JSON.stringify(value);
        const targeting = withRollout(flag.targeting, ruleId, input.initialRolloutPercent, insertRuleValue);
        problems.push(...flagContentProblems({ targeting }, flag.type, 'body.').filter((p) => p.path.startsWith('body.targeting.0')).map((p) => ({ ...p, path: 'body.value' })));
      }
    }
    if (problems.length) throw validationFailed(problems);

    const config: CanaryConfig = {
      initialRolloutPercent: input.initialRolloutPercent,
      targetRolloutPercent: input.targetRolloutPercent,
      rampStepPercent: input.rampStepPercent,
      soakPeriodMinutes: input.soakPeriodMinutes,
      errorRateGateDelta: input.errorRateGateDelta,
      latencyGateDeltaMs: input.latencyGateDeltaMs,
      autoRollbackOnBreach: input.autoRollbackOnBreach,
      minSamplesPerCohort: input.minSamplesPerCohort,
      // The larger of 10 soak periods and 1 minute (docs/canary.md).
      maxWaitMinutes: input.maxWaitMinutes ?? Math.max(10 * input.soakPeriodMinutes, 1),
      alpha: input.alpha,
    };
    const workflowId = canaryWorkflowId(ref.serviceId, ref.environment, ref.key);
    let pipeline: CanaryPipeline;
    try {
      pipeline = await this.deps.sql.begin(async (tx) => {
        const inserted = await this.deps.store.insert(
          {
            id: newId('cnr'),
            projectId: grant.projectId,
            flagId: flag.id,
            flagKey: ref.key,
            serviceId: ref.serviceId,
            environment: ref.environment,
            ruleId,
            config,
            preCanaryVersion: flag.version,
            workflowId,
            createdByActor: actor.name,
          },
          tx,
        );
        await writeAudit(tx, actor, this.auditEntry(inserted, 'canary.start', { config, fromVersion: flag.version }));
        return inserted;
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw activeConflict(ref);
      throw error;
    }
    const target: CanaryTarget = { projectId: grant.projectId, orgId: grant.orgId, serviceId: ref.serviceId, environment: ref.environment, flagKey: ref.key };
    const startPipeline = () =>
      startWorkflow(
        this.deps.temporal,
        CANARY_PIPELINE,
        { pipelineId: pipeline.id, target, ruleId, insertRuleValue, config, preCanaryVersion: flag.version },
        { workflowId },
      );
    try {
      await startPipeline().catch(async (error: unknown) => {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
        // The workflow id is the flag's: the previous pipeline's workflow (its record has ended,
        // or the insert above would have failed) may still be finishing its last step.
        const finished = this.deps.temporal.client.workflow.getHandle(workflowId).result().catch(() => undefined);
        await Promise.race([finished, sleep(PREVIOUS_RUN_WAIT_MS, undefined, { ref: false })]);
        await startPipeline();
      });
    } catch (error) {
      await this.deps.store.markEnded(pipeline.id, 'the pipeline workflow could not be started');
      throw error;
    }
    return this.toRecord(pipeline, null);
  }

  /**
   * A project's pipelines as their workflows last persisted them (no live query per pipeline:
   * a list of many running canaries must not cost a Temporal round trip each).
   */
  async list(projectId: string, opts: { activeOnly: boolean; limit: number }): Promise<CanaryRecord[]> {
    const pipelines = await this.deps.store.listForProject(projectId, opts);
    return pipelines.map((p) => this.toRecord(p, null));
  }

  /** The active pipeline, else the latest; 404 when the flag never had one. */
  async get(ref: FlagRef): Promise<CanaryRecord> {
    const pipeline = await this.requirePipeline(ref);
    return this.toRecord(pipeline, await this.liveState(pipeline));
  }

  /**
   * `force`: the current stage ends now, without soak or gate (the next stage's flag change is
   * audited as forced). Otherwise the gate runs now on the stage so far and the stage ends only
   * on `pass`; any other decision is a 409 carrying the gate.
   */
  async advance(actor: AuditActor, grant: { orgId: string }, ref: FlagRef, force: boolean): Promise<CanaryRecord> {
    const pipeline = await this.requireActive(ref);
    const state = await this.liveState(pipeline);
    const stage = state?.currentStage ?? pipeline.currentStage;
    if (!stage) throw conflict('The pipeline is between stages; try again in a moment');
    let gate: CanaryGate | undefined;
    if (!force) {
      gate = await runCanaryGate(this.deps, {
        target: this.targetOf(pipeline, grant.orgId),
        ruleId: pipeline.ruleId,
        fromMs: Date.parse(stage.startedAt),
        toMs: Date.now(),
        rolloutPercent: stage.rolloutPercent,
        config: pipeline.config,
        final: true,
      });
      if (gate.decision !== 'pass') throw conflict(`The gate did not pass (${gate.decision}): ${gate.reason}`, { gate });
    }
    await this.audit(actor, pipeline, 'canary.advance', { force, stage: stage.index, rolloutPercent: stage.rolloutPercent, ...(gate ? { gate } : {}) });
    await this.signal(pipeline, () => this.handle(pipeline).signal(canaryAdvanceSignal, { force, requestedBy: actor.name, gate }));
    // Done once the next stage has started (between stages there is none) or the pipeline ended.
    await this.settled(pipeline, (s) => (s.currentStage?.index ?? -1) > stage.index || !ACTIVE_STATUSES.includes(s.status));
    return this.get(ref);
  }

  /** Restores the flag content from before the pipeline (as a new version) and ends it as aborted. */
  async abort(actor: AuditActor, ref: FlagRef, reason: string): Promise<CanaryRecord> {
    const pipeline = await this.requireActive(ref);
    await this.audit(actor, pipeline, 'canary.abort', { reason });
    await this.signal(pipeline, () => this.handle(pipeline).signal(canaryAbortSignal, { reason, requestedBy: actor.name }));
    await this.settled(pipeline, (s) => !ACTIVE_STATUSES.includes(s.status));
    return this.get(ref);
  }

  /**
   * Waits (up to SETTLE_MS) until the workflow acted on a signal, so the answer shows the effect
   * (the restored flag, the next stage) rather than the state before; after that the answer is
   * the state as it is, still correct, only not yet changed.
   */
  private async settled(pipeline: CanaryPipeline, done: (state: CanaryState) => boolean): Promise<void> {
    const deadline = Date.now() + SETTLE_MS;
    while (Date.now() < deadline) {
      const stored = await this.deps.store.find(pipeline.id);
      if (stored && done(stored)) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Who asked the pipeline to start, advance or abort; the flag changes it makes are audited by FlagService. */
  private audit(actor: AuditActor, pipeline: CanaryPipeline, action: `canary.${string}`, metadata: Record<string, unknown>) {
    return this.deps.sql.begin((tx) => writeAudit(tx, actor, this.auditEntry(pipeline, action, metadata)));
  }

  private auditEntry(pipeline: CanaryPipeline, action: `canary.${string}`, metadata: Record<string, unknown>) {
    return {
      projectId: pipeline.projectId,
      action,
      resourceType: 'flag',
      resourceId: pipeline.flagId,
      resourceName: pipeline.flagKey,
      metadata: { serviceId: pipeline.serviceId, environment: pipeline.environment, canary: { pipelineId: pipeline.id, ...metadata } },
    };
  }

  /** Sends a signal; a record whose workflow is gone (its Temporal history lost) is ended instead: 409. */
  private async signal(pipeline: CanaryPipeline, send: () => Promise<void>): Promise<void> {
    try {
      await send();
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
      await this.deps.store.markEnded(pipeline.id, 'the pipeline workflow no longer exists');
      throw conflict('The canary pipeline workflow no longer exists; the pipeline was ended');
    }
  }

  private async requirePipeline(ref: FlagRef): Promise<CanaryPipeline> {
    const pipeline = await this.deps.store.activeOrLatest(ref.serviceId, ref.environment, ref.key);
    if (!pipeline) throw notFound(`Canary pipeline of flag "${ref.key}"`);
    return pipeline;
  }

  private async requireActive(ref: FlagRef): Promise<CanaryPipeline> {
    const pipeline = await this.requirePipeline(ref);
    if (!ACTIVE_STATUSES.includes(pipeline.status)) throw conflict(`The canary pipeline of flag "${ref.key}" has ended (${pipeline.status})`);
    return pipeline;
  }

  private handle(pipeline: CanaryPipeline) {
    return this.deps.temporal.client.workflow.getHandle(pipeline.workflowId);
  }

  /** The running workflow's own state (fresher than the record between its writes); null when it has ended. */
  private async liveState(pipeline: CanaryPipeline): Promise<CanaryState | null> {
    if (!ACTIVE_STATUSES.includes(pipeline.status)) return null;
    try {
      return await this.handle(pipeline).query(canaryStateQuery);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return null;
      if (error instanceof HttpError) throw error;
      this.deps.logger.warn({ err: error, pipelineId: pipeline.id }, 'canary query failed; answering the stored record');
      return null;
    }
  }

  private targetOf(p: CanaryPipeline, orgId: string): CanaryTarget {
    return { projectId: p.projectId, orgId, serviceId: p.serviceId, environment: p.environment as CanaryTarget['environment'], flagKey: p.flagKey };
  }

  private toRecord(p: CanaryPipeline, live: CanaryState | null): CanaryRecord {
    const state = live ?? { status: p.status, currentStage: p.currentStage, completedStages: p.completedStages, soakEndsAt: p.soakEndsAt, health: p.health, statusReason: p.statusReason };
    const running = state.status === 'running' && state.soakEndsAt;
    return {
      id: p.id,
      flagKey: p.flagKey,
      serviceId: p.serviceId,
      environment: p.environment,
      ruleId: p.ruleId,
      status: state.status,
      statusReason: state.statusReason,
      config: p.config,
      currentStage: state.currentStage,
      completedStages: state.completedStages,
      remainingSoakSeconds: running ? Math.max(0, Math.ceil((Date.parse(state.soakEndsAt!) - Date.now()) / 1000)) : 0,
      health: state.health,
      createdAt: p.createdAt,
      updatedAt: p.updatedAt,
    };
  }
}
