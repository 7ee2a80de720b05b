import { ApplicationFailure } from '@temporalio/activity';
import type { Analytics } from '../analytics/client';
import type { Sql } from '../api/infra/postgres';
import type { NotifyOrgAlertChannels } from '../api/features/alert-channels/types';
import type { AuditActor } from '../api/features/audit/writer';
import { runCanaryGate } from '../api/features/canary/gate';
import { CanaryStore } from '../api/features/canary/store';
import { CanaryWarehouse } from '../api/features/canary/warehouse';
import type { FlagService } from '../api/features/flags/service';
import type { CANARY_ROLLBACK_REASONS, CanaryMetrics } from '../api/lib/metrics/metrics';
import type { PrometheusGuards } from '../api/lib/release-safety/prometheus-guards';
import type { FlagRef } from '../api/features/flags/types';
import { withRollout } from '../api/features/canary/rules';
import type { CanaryTarget } from '../api/domain/canary';
import { CANARY_TARGET_GONE, type CanaryActivities } from '../workflows/messages';

/** What the canary activities run with; optional so a worker started for other workflows alone (tests) still starts. */
export interface CanaryDeps {
  canary?: CanaryActivityDeps;
}

export interface CanaryActivityDeps {
  sql: Sql;
  analytics: Analytics;
  /** The one flag write path: every stage, rollback and abort is a versioned, audited change. */
  flags: FlagService;
  notifyOrgAlertChannels: NotifyOrgAlertChannels;
  /** Asks the pipeline's Prometheus guards at every gate. */
  guards: PrometheusGuards;
  /** Stages applied, gate decisions and rollbacks (docs/operations.md#metrics). */
  metrics: CanaryMetrics;
}

/** Flag changes a pipeline makes are attributed to it, as triggers' are to `trigger:<name>`. */
export const pipelineActor = (pipelineId: string): AuditActor => ({ name: `canary:${pipelineId}`, userId: null });

/** The flag or rule the pipeline works on is gone: retrying cannot help, the workflow stops instead. */
const targetGone = (message: string) => ApplicationFailure.nonRetryable(message, CANARY_TARGET_GONE);

/** A restore's outcome as the rollback metric's reason. */
const ROLLBACK_REASON: Record<'rolled_back' | 'aborted', (typeof CANARY_ROLLBACK_REASONS)[number]> = { rolled_back: 'gate_failed', aborted: 'aborted' };

const refOf = (t: CanaryTarget): FlagRef => ({ key: t.flagKey, serviceId: t.serviceId, environment: t.environment });

/**
 * The canary workflow's side effects (workflows/canary.ts). Each is idempotent under retry: a
 * rollout already at the stage's percentage writes no version (FlagService skips unchanged
 * content), a restore of content already restored likewise, the state write is the whole state,
 * and the alert's id makes a repeated notification deliver once per channel.
 */
export function createCanaryActivities({ canary }: CanaryDeps): CanaryActivities {
  if (canary) return canaryActivities(canary);
  const missing = async (): Promise<never> => {
    throw new Error('this worker was started without the canary dependencies');
  };
  return { applyCanaryRollout: missing, evaluateCanaryGate: missing, restoreCanaryFlag: missing, notifyCanaryRollback: missing, saveCanaryState: missing };
}

export function canaryActivities(deps: CanaryActivityDeps): CanaryActivities {
  const store = new CanaryStore();
  const warehouse = new CanaryWarehouse(deps.analytics);

  return {
    async applyCanaryRollout(step) {
      const ref = refOf(step.target);
      const current = await deps.flags.get(ref);
      if (!current) throw targetGone(`the flag ${step.target.flagKey} no longer exists`);
      // Only the first stage inserts the rule: one removed later was removed by someone on purpose.
      const insert = step.stageIndex === 0 ? step.insertRuleValue : undefined;
      if (!insert && !current.targeting.some((r) => r.id === step.ruleId)) throw targetGone(`the rule ${step.ruleId} was removed from the flag`);
      // Written only if the flag is still the version read (409 otherwise, and the activity retries).
      const flag = await deps.flags.update(
        pipelineActor(step.pipelineId),
        ref,
        { targeting: withRollout(current.targeting, step.ruleId, step.rolloutPercent, insert) },
        current.version,
        {
          // The canary passed the change policy when it started (docs/change-requests.md#the-gate).
          permit: 'release-safety',
          metadata: {
            canary: {
              pipelineId: step.pipelineId,
              stage: step.stageIndex,
              rolloutPercent: step.rolloutPercent,
              ruleId: step.ruleId,
              ...(step.forcedBy ? { forced: true, forcedBy: step.forcedBy } : {}),
              ...(step.previousGate ? { gate: step.previousGate } : {}),
            },
          },
        },
      );
      deps.metrics.stageTransitions.inc();
      return flag.version;
    },

    async evaluateCanaryGate(request) {
      const gate = await runCanaryGate({ flags: deps.flags, warehouse, guards: deps.guards }, request);
      deps.metrics.gateDecisions.inc({ result: gate.decision });
      return gate;
    },

    async restoreCanaryFlag(restore) {
      if (!(await deps.flags.get(refOf(restore.target)))) throw targetGone(`the flag ${restore.target.flagKey} no longer exists`);
      const flag = await deps.flags.rollback(pipelineActor(restore.pipelineId), refOf(restore.target), restore.preCanaryVersion, {
        permit: 'release-safety',
        metadata: {
          canary: {
            pipelineId: restore.pipelineId,
            action: restore.outcome,
            reason: restore.reason,
            ...(restore.requestedBy ? { requestedBy: restore.requestedBy } : {}),
            ...(restore.gate ? { gate: restore.gate } : {}),
          },
        },
      });
      deps.metrics.rollbacks.inc({ reason: ROLLBACK_REASON[restore.outcome] });
      return flag.version;
    },

    async notifyCanaryRollback(pipelineId, target, gate, stage) {
      const notified = await deps.notifyOrgAlertChannels(target.orgId, {
        id: `canary:${pipelineId}:rolled_back`,
        kind: 'canary.rollback',
        title: `Canary of ${target.flagKey} rolled back`,
        summary: `The canary of flag ${target.flagKey} (${target.environment}) failed its gate at ${stage.rolloutPercent}% and was rolled back: ${gate.reason}`,
        severity: 'critical',
        timestamp: new Date().toISOString(),
        projectId: target.projectId,
        serviceId: target.serviceId,
        environment: target.environment,
        flagKey: target.flagKey,
        details: { pipelineId, stage: stage.index, rolloutPercent: stage.rolloutPercent, gate },
      });
      return notified.length;
    },

    async saveCanaryState(pipelineId, state) {
      await store.saveState(deps.sql, pipelineId, state);
    },
  };
}
