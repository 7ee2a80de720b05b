import { evaluateGate, type GateResult } from '../../lib/release-safety/gates';
import type { FlagService } from '../flags/service';
import type { CanaryGateRequest } from '../../../workflows/messages';
import type { CanaryWarehouse } from './warehouse';

/**
 * One gate of a canary stage: both cohorts of the canaried rule over the stage's window from the
 * warehouse, judged by evaluateGate (api/lib/release-safety). The workflow's checks and a non-forced
 * advance both run it. The rule is read at the time of the check: its value decides which side
 * an outcome event naming the flag counts for (CanaryWarehouse).
 */
export async function runCanaryGate(deps: { flags: FlagService; warehouse: CanaryWarehouse }, request: CanaryGateRequest): Promise<GateResult> {
  const { target, ruleId, config } = request;
  const flag = await deps.flags.get({ key: target.flagKey, serviceId: target.serviceId, environment: target.environment });
  const rule = flag?.targeting.find((r) => r.id === ruleId);
  const cohorts = await deps.warehouse.cohorts(
    {
      projectId: target.projectId,
      serviceId: target.serviceId,
      environment: target.environment,
      flagKey: target.flagKey,
      ruleId,
      treatmentValue: rule ? JSON.stringify(rule.value) : '',
      conditionsAlwaysHold: rule ? rule.conditions.length === 0 : false,
    },
    request.fromMs,
    request.toMs,
  );
  return evaluateGate(
    cohorts.treatment,
    cohorts.control,
    {
      alpha: config.alpha,
      minSamplesPerCohort: config.minSamplesPerCohort,
      errorRateGateDelta: config.errorRateGateDelta,
      latencyGateDeltaMs: config.latencyGateDeltaMs,
      treatmentShare: request.rolloutPercent / 100,
    },
    { final: request.final },
  );
}
