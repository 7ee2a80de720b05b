import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpError, conflict, notFound, validationFailed } from '../../http/errors';
import { newId } from '../../infra/ids';
import { currentDeadline } from '../../infra/deadline';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { startWorkflowWithUpdate, type Temporal } from '../../infra/temporal';
import { writeAudit, type AuditActor } from '../audit/writer';
import type { FlagService } from '../flags/service';
import type { FlagRef } from '../flags/types';
import { flagContentProblems } from '../flags/validation';
import {
  CANARY_PIPELINE,
  CANARY_REFUSED,
  canaryAbortUpdate,
  canaryAdvanceUpdate,
  canaryFirstStageUpdate,
  canaryStateQuery,
  canaryWorkflowId,
  type CanaryPipelineInput,
} from '../../../workflows/messages';
import { INSERTED_RULE_ID, withRollout } from './rules';
import { runCanaryGate } from './gate';
import { ACTIVE_STATUSES, canaryConfigOf, type CanaryConfigRequest, type CanaryGate, type CanaryRecord, type CanaryState, type CanaryTarget } from '../../domain/canary';
import { activePipelineExists, type CanaryPipeline, type CanaryStore } from './store';
import type { CanaryWarehouse } from './warehouse';
import type { ChangeGate } from '../change-requests/gate';
import type { PrometheusGuards } from '../../lib/release-safety/prometheus-guards';

/** The start request's configuration and the rule it ramps (an existing one) or inserts (with this value). */
export interface CanaryStartInput extends CanaryConfigRequest {
  ruleId?: string;
  value?: unknown;
  /** The approved change request a start in a protected environment runs under. */
  changeRequestId?: string;
}

/** A pipeline may not have more stages than this (one flag version and one soak each). */
export const MAX_STAGES = 100;

export interface CanaryServiceDeps {
  sql: Sql;
  store: CanaryStore;
  flags: FlagService;
  /** A start in a protected environment needs an approved change request (docs/change-requests.md#canaries). */
  gate: Pick<ChangeGate, 'admitCanary'>;
  warehouse: CanaryWarehouse;
  /** The pipeline's Prometheus guards: their servers must be allowed at start, and they are asked at every gate. */
  guards: PrometheusGuards;
  temporal: Temporal;
  logger: Logger;
  /** Default ANSWER_WAIT_MS. */
  answerWaitMs?: number;
}

/** How long a start waits for the previous pipeline's workflow to finish before trying once more. */
const PREVIOUS_RUN_WAIT_MS = 15_000;

/**
 * How long start, advance and abort wait for the workflow's answer by default. A rollout that
 * keeps failing (its activity retries) or a worker that is down must not hold the request
 * forever: past this they answer the state as it is, and the update still takes effect.
 */
const ANSWER_WAIT_MS = 30_000;
/** Time left after the wait to read and answer the record. */
const ANSWER_MARGIN_MS = 2_000;

/**
 * Canary pipelines (docs/canary.md): the record lives in Postgres (one active per flag, service
 * and environment), the pipeline itself is the canaryPipeline workflow. Start inserts the record
 * (a second concurrent start hits the partial unique index: 409) and starts the workflow; GET
 * answers the workflow's query while it runs and the record otherwise. Start, advance and abort
 * are workflow updates that answer once they took effect. Authorization is the routes'
 * (flags:read / flags:write on the service).
 */
export class CanaryService {
  constructor(private readonly deps: CanaryServiceDeps) {}

  /** Answers once the first stage's rollout is in the flag (or the pipeline ended before it could be). */
  async start(actor: AuditActor, grant: { projectId: string; orgId: string }, ref: FlagRef, input: CanaryStartInput): Promise<CanaryRecord> {
    const { sql, store } = this.deps;
    const flag = await this.deps.flags.get(ref);
    if (!flag) throw notFound(`Flag "${ref.key}"`);
    // A running pipeline may already have put its rule in the flag: say it is running (409)
    // rather than judging the flag it changed (400). The unique index settles exact races.
    const running = await store.activeOrLatest(sql, ref.serviceId, ref.environment, ref.key);
    if (running && ACTIVE_STATUSES.includes(running.status)) throw activePipelineExists(ref.key, ref.environment);
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
    problems.push(...this.deps.guards.problems(input.guards ?? [], 'body.guards'));
    if (problems.length) throw validationFailed(problems);

    const config = canaryConfigOf(input);
    const workflowId = canaryWorkflowId(ref.serviceId, ref.environment, ref.key);
    const pipeline = await sql.begin(async (tx) => {
      await this.deps.gate.admitCanary(tx, { projectId: grant.projectId, serviceId: ref.serviceId, environment: ref.environment, flagKey: ref.key }, input.changeRequestId);
      const inserted = await store.insert(tx, {
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
      });
      await writeAudit(tx, actor, this.auditEntry(inserted, 'canary.start', { config, fromVersion: flag.version, ...(input.changeRequestId ? { changeRequestId: input.changeRequestId } : {}) }));
      return inserted;
    });
    const target: CanaryTarget = { projectId: grant.projectId, orgId: grant.orgId, serviceId: ref.serviceId, environment: ref.environment, flagKey: ref.key };
    const pipelineInput: CanaryPipelineInput = { pipelineId: pipeline.id, target, ruleId, insertRuleValue, config, preCanaryVersion: flag.version };
    const startPipeline = () => startWorkflowWithUpdate(this.deps.temporal, CANARY_PIPELINE, pipelineInput, { workflowId, update: canaryFirstStageUpdate });
    const firstStage = startPipeline()
      .catch(async (error: unknown) => {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
        // The workflow id is the flag's: the previous pipeline's workflow (its record has ended,
        // or the insert above would have failed) may still be finishing its last step.
        const finished = this.deps.temporal.client.workflow.getHandle(workflowId).result().catch(() => undefined);
        await Promise.race([finished, sleep(PREVIOUS_RUN_WAIT_MS, undefined, { ref: false })]);
        return startPipeline();
      })
      .catch(async (error: unknown) => {
        await store.markEnded(sql, pipeline.id, 'the pipeline workflow could not be started');
        throw error;
      });
    return this.toRecord(pipeline, await this.answerWithin(firstStage));
  }

  /**
   * A project's pipelines as their workflows last persisted them (no live query per pipeline:
   * a list of many running canaries must not cost a Temporal round trip each).
   */
  async list(projectId: string, opts: { activeOnly: boolean; limit: number }): Promise<CanaryRecord[]> {
    const pipelines = await this.deps.store.listForProject(this.deps.sql, projectId, opts);
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
   * on `pass`; any other decision is a 409 carrying the gate. Answers once the next stage started
   * or the pipeline ended.
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
    const advanced = await this.update(pipeline, () => this.handle(pipeline).executeUpdate(canaryAdvanceUpdate, { args: [{ force, requestedBy: actor.name, gate }] }));
    return this.toRecord(pipeline, advanced ?? (await this.liveState(pipeline)));
  }

  /** Restores the flag content from before the pipeline (as a new version) and ends it as aborted. */
  async abort(actor: AuditActor, ref: FlagRef, reason: string): Promise<CanaryRecord> {
    const pipeline = await this.requireActive(ref);
    await this.audit(actor, pipeline, 'canary.abort', { reason });
    const aborted = await this.update(pipeline, () => this.handle(pipeline).executeUpdate(canaryAbortUpdate, { args: [{ reason, requestedBy: actor.name }] }));
    return this.toRecord(pipeline, aborted ?? (await this.liveState(pipeline)));
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

  /** The workflow's answer, or null when it did not come in time. */
  private answerWithin<T>(answer: Promise<T>): Promise<T | null> {
    const waitMs = this.deps.answerWaitMs ?? ANSWER_WAIT_MS;
    // This wait is the route's answer by design, so the request deadline moves past it.
    currentDeadline()?.extendTo(Date.now() + waitMs + ANSWER_MARGIN_MS);
    return Promise.race([answer, sleep(waitMs, null, { ref: false })]);
  }

  /**
   * Sends an update and answers the state it leaves (null when it did not come in time). What the
   * workflow's validator refuses is a 409 with its reason; a record whose workflow is gone (its
   * Temporal history lost) is ended instead: 409.
   */
  private async update(pipeline: CanaryPipeline, send: () => Promise<CanaryState>): Promise<CanaryState | null> {
    try {
      return await this.answerWithin(send());
    } catch (error) {
      // The update's failure (WorkflowUpdateFailedError) carries the workflow's refusal as its cause.
      if (error instanceof Error && error.cause instanceof ApplicationFailure && error.cause.type === CANARY_REFUSED) throw conflict(error.cause.message);
      if (!(error instanceof WorkflowNotFoundError)) throw error;
      await this.deps.store.markEnded(this.deps.sql, pipeline.id, 'the pipeline workflow no longer exists');
      throw conflict('The canary pipeline workflow no longer exists; the pipeline was ended');
    }
  }

  private async requirePipeline(ref: FlagRef): Promise<CanaryPipeline> {
    const pipeline = await this.deps.store.activeOrLatest(this.deps.sql, ref.serviceId, ref.environment, ref.key);
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
    return { projectId: p.projectId, orgId, serviceId: p.serviceId, environment: p.environment, flagKey: p.flagKey };
  }

  /** The record from the stored pipeline and, when given, the workflow's fresher state. */
  private toRecord(p: CanaryPipeline, live: CanaryState | null): CanaryRecord {
    const state = live ?? p;
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
