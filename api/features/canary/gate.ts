import { evaluateGate, type GateResult } from '../../lib/release-safety/gates';
import { withGuards, type PrometheusGuards } from '../../lib/release-safety/prometheus-guards';
import type { FlagService } from '../flags/service';
import type { CanaryGateRequest } from '../../../workflows/messages';
import type { CanaryWarehouse } from './warehouse';

/**
 * One gate of a canary stage: both cohorts of the canaried rule over the stage's window from the
 * warehouse, judged by evaluateGate (api/lib/release-safety). The workflow's checks and a non-forced
 * advance both run it. The rule is read at the time of the check: its value decides which side
 * an outcome event naming the flag counts for (CanaryWarehouse). The pipeline's Prometheus guards are
 * asked over the same window (docs/canary.md#prometheus-guards).
 */
export async function runCanaryGate(deps: { flags: FlagService; warehouse: CanaryWarehouse; guards: PrometheusGuards }, request: CanaryGateRequest): Promise<GateResult> {
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
  const guards = await deps.guards.check(config.guards ?? [], { flagKey: target.flagKey, environment: target.environment, serviceId: target.serviceId, startMs: request.fromMs, endMs: request.toMs });
  const gate = evaluateGate(
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
  return withGuards(gate, guards);
}
