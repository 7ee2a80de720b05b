import { ActivityFailure, ApplicationFailure, allHandlersFinished, condition, continueAsNew, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { ACTIVE_STATUSES, type CanaryConfig, type CanaryGate, type CanaryHealth, type CanaryStage, type CanaryState, type CanaryStatus } from '../api/domain/canary';
import {
  CANARY_REFUSED,
  CANARY_TARGET_GONE,
  canaryAbortUpdate,
  canaryAdvanceUpdate,
  canaryFirstStageUpdate,
  canaryStateQuery,
  type CanaryAbort,
  type CanaryActivities,
  type CanaryAdvance,
  type CanaryPipelineInput,
} from './messages';

const { applyCanaryRollout, evaluateCanaryGate, restoreCanaryFlag, notifyCanaryRollback, saveCanaryState } = proxyActivities<CanaryActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/** Gate checks during a soak: a tenth of it, between 1 and 10 seconds apart. */
export function checkIntervalMs(config: CanaryConfig): number {
  return Math.min(10_000, Math.max(1_000, (config.soakPeriodMinutes * 60_000) / 10));
}

/**
 * The rollout of each stage: initial, then rampStepPercent more each time, the last one exactly
 * the target. A stage at 100% has no control cohort (no partial rollout, so no side is recorded),
 * so it is not gated: the pipeline sets it once the stage before it passed.
 */
export function rampPercents(config: CanaryConfig): number[] {
  const percents: number[] = [];
  for (let p = config.initialRolloutPercent; p < config.targetRolloutPercent; p += config.rampStepPercent) percents.push(roundPercent(p));
  if (percents[percents.length - 1] !== config.targetRolloutPercent) percents.push(config.targetRolloutPercent);
  return percents;
}

/** The engine buckets to thousandths of a percent; float steps (0.1 + 0.2) must not leave noise. */
const roundPercent = (p: number) => Math.round(p * 1000) / 1000;

/** Histories past this many events continue as new at the next stage boundary (unless the input says otherwise). */
export const HISTORY_LIMIT = 5_000;

/** Healthy: passed, or soaking with enough data and no harm shown; insufficient_data: waiting for data (or a sound split). */
function healthOf(gate: CanaryGate, at: string, config: CanaryConfig): CanaryHealth {
  // A guard that could not be judged is missing evidence like too few exposures.
  const guardsJudged = (gate.guards ?? []).every((g) => g.decision !== 'wait');
  const enough = gate.treatment.exposures >= config.minSamplesPerCohort && gate.control.exposures >= config.minSamplesPerCohort && gate.srm.ok && guardsJudged;
  const status = gate.decision === 'fail' ? 'breach' : gate.decision === 'pass' || enough ? 'healthy' : 'insufficient_data';
  return { status, checkedAt: at, gate };
}

const nowIso = () => new Date(Date.now()).toISOString();

/** Why an activity failed when its flag or rule is gone; null for any other failure. */
function targetGone(error: unknown): string | null {
  if (error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.type === CANARY_TARGET_GONE) return error.cause.message;
  return null;
}

/**
 * One canary pipeline (docs/canary.md): each stage sets the canaried rule's rolloutPercentage
 * through the flag write path, soaks, and is gated (treatment against the randomized control of
 * the same rule over the stage's window) every checkIntervalMs and at the soak's end. A failing
 * gate rolls back (autoRollbackOnBreach) or pauses; too little data past maxWaitMinutes pauses; a
 * paused pipeline waits for an operator's advance or abort. Every change of state is written to
 * the pipeline record by saveCanaryState, and the canaryState query answers it while running.
 * Start, advance and abort are updates: their validators refuse what the present state cannot
 * take, and each answers the state once it took effect.
 */
export async function canaryPipeline(input: CanaryPipelineInput): Promise<CanaryStatus> {
  const { config, target, pipelineId } = input;
  const state: CanaryState = input.resume ?? {
    status: 'running',
    currentStage: null,
    completedStages: [],
    soakEndsAt: null,
    health: { status: 'pending', checkedAt: null, gate: null },
    statusReason: null,
  };
  let advance: CanaryAdvance | null = null;
  let abort: CanaryAbort | null = null;
  const ended = () => !ACTIVE_STATUSES.includes(state.status);
  const refuse = (message: string) => ApplicationFailure.create({ message, type: CANARY_REFUSED, nonRetryable: true });
  const refuseEnded = () => {
    if (ended()) throw refuse(`The canary pipeline of flag "${target.flagKey}" has ended (${state.status})`);
  };

  setHandler(canaryStateQuery, () => state);
  setHandler(canaryFirstStageUpdate, async () => {
    await condition(() => state.currentStage !== null || ended());
    return state;
  });
  setHandler(
    canaryAdvanceUpdate,
    async (request) => {
      const from = state.currentStage!.index;
      advance = request;
      await condition(() => (state.currentStage?.index ?? -1) > from || ended());
      return state;
    },
    {
      validator(request) {
        refuseEnded();
        if (!state.currentStage) throw refuse('The pipeline is between stages; try again in a moment');
        if (!request.force && request.gate?.decision !== 'pass') throw refuse('An advance without force needs a passing gate');
      },
    },
  );
  setHandler(
    canaryAbortUpdate,
    async (request) => {
      abort ??= request;
      await condition(ended);
      return state;
    },
    {
      validator({ reason }) {
        refuseEnded();
        if (!reason.trim()) throw refuse('An abort needs a reason');
      },
    },
  );

  const percents = rampPercents(config);
  const soakMs = config.soakPeriodMinutes * 60_000;
  const maxWaitMs = config.maxWaitMinutes * 60_000;
  const everyMs = checkIntervalMs(config);
  const save = () => saveCanaryState(pipelineId, state);

  async function end(status: CanaryStatus, reason: string | null): Promise<CanaryStatus> {
    state.status = status;
    state.statusReason = reason;
    state.soakEndsAt = null;
    if (state.currentStage && status !== 'completed') state.currentStage.endedAt = nowIso();
    await save();
    // Every advance or abort in flight answers before the workflow closes.
    await condition(allHandlersFinished);
    return status;
  }

  /** Restores the pre-canary content; the reason to add to the status when there was nothing left to restore. */
  async function restore(outcome: 'rolled_back' | 'aborted', reason: string, extra: { requestedBy?: string; gate?: CanaryGate }): Promise<string> {
    try {
      await restoreCanaryFlag({ pipelineId, target, preCanaryVersion: input.preCanaryVersion, outcome, reason, ...extra });
      return '';
    } catch (error) {
      const gone = targetGone(error);
      if (gone === null) throw error;
      return ` (nothing restored: ${gone})`;
    }
  }

  /** Soaks and gates the current stage; 'advance' when it may end, or the pipeline's final status. */
  async function soak(stage: CanaryStage): Promise<'advance' | CanaryStatus> {
    const soakEnd = Date.parse(stage.startedAt) + soakMs;
    const waitLimit = soakEnd + maxWaitMs;
    for (;;) {
      const paused = state.status === 'paused';
      const untilNext = paused ? undefined : Math.max(0, Math.min(everyMs, Date.now() < soakEnd ? soakEnd - Date.now() : everyMs));
      const requested = () => advance !== null || abort !== null;
      if (untilNext === undefined) await condition(requested);
      else await condition(requested, untilNext);

      if (abort) {
        const request: CanaryAbort = abort;
        const unrestored = await restore('aborted', request.reason, { requestedBy: request.requestedBy });
        return end('aborted', request.reason + unrestored);
      }
      if (advance) {
        const request: CanaryAdvance = advance;
        advance = null;
        if (request.force) stage.forcedBy = request.requestedBy;
        else {
          // The update's validator let only a passing gate through.
          stage.gate = request.gate!;
          state.health = healthOf(request.gate!, nowIso(), config);
        }
        return 'advance';
      }
      if (paused) continue;

      const final = Date.now() >= soakEnd;
      const gate = await evaluateCanaryGate({ target, ruleId: input.ruleId, fromMs: Date.parse(stage.startedAt), toMs: Date.now(), rolloutPercent: stage.rolloutPercent, config, final });
      stage.gate = gate;
      state.health = healthOf(gate, nowIso(), config);
      if (gate.decision === 'pass' && final) return 'advance';
      if (gate.decision === 'fail') {
        if (config.autoRollbackOnBreach) {
          const unrestored = await restore('rolled_back', gate.reason, { gate });
          await notifyCanaryRollback(pipelineId, target, gate, stage);
          return end('rolled_back', `gate failed at ${stage.rolloutPercent}%: ${gate.reason}${unrestored}`);
        }
        state.status = 'paused';
        state.statusReason = `gate failed at ${stage.rolloutPercent}%: ${gate.reason}; waiting for advance or abort`;
      } else if (final && Date.now() >= waitLimit) {
        state.status = 'paused';
        state.statusReason = `no decision after waiting ${config.maxWaitMinutes} minutes past the soak: ${gate.reason}; waiting for advance or abort`;
      }
      await save();
    }
  }

  let previous: CanaryStage | undefined = state.completedStages[state.completedStages.length - 1];
  for (let index = state.currentStage?.index ?? state.completedStages.length; index < percents.length; index++) {
    const resuming = state.currentStage?.index === index;
    if (!resuming) {
      if (workflowInfo().historyLength > (input.historyLimit ?? HISTORY_LIMIT) && allHandlersFinished()) await continueAsNew<typeof canaryPipeline>({ ...input, resume: state });
      const rolloutPercent = percents[index];
      try {
        await applyCanaryRollout({
          pipelineId,
          target,
          ruleId: input.ruleId,
          insertRuleValue: input.insertRuleValue,
          stageIndex: index,
          rolloutPercent,
          previousGate: previous?.gate,
          forcedBy: previous?.forcedBy,
        });
      } catch (error) {
        const gone = targetGone(error);
        if (gone === null) throw error;
        // Someone removed what the pipeline ramps: it stops without touching the flag again.
        return end('aborted', `stopped before ${rolloutPercent}%: ${gone}`);
      }
      state.currentStage = { index, rolloutPercent, startedAt: nowIso() };
      state.soakEndsAt = new Date(Date.now() + soakMs).toISOString();
      state.health = { status: 'pending', checkedAt: null, gate: null };
      await save();
    }
    const stage = state.currentStage!;
    // A stage at 100% has no control cohort: the pipeline is done once it is set.
    if (stage.rolloutPercent >= 100) break;
    const outcome = await soak(stage);
    if (outcome !== 'advance') return outcome;
    stage.endedAt = nowIso();
    state.completedStages.push(stage);
    state.currentStage = null;
    state.status = 'running';
    state.statusReason = null;
    previous = stage;
    if (index < percents.length - 1) await save();
  }
  if (state.currentStage) {
    state.currentStage.endedAt = nowIso();
    state.completedStages.push(state.currentStage);
    state.currentStage = null;
  }
  return end('completed', null);
}
