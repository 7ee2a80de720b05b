/** The release-safety shapes the pages share, taken from the generated API types (schema.d.ts). */
import type { paths } from '../../api/client';

export type CanaryRecord = paths['/api/flags/{key}/canary']['get']['responses'][200]['content']['application/json'];
export type CanaryStage = CanaryRecord['completedStages'][number];
export type CanaryGate = NonNullable<CanaryStage['gate']>;
export type CanaryStatus = CanaryRecord['status'];
export type AuditEntry = paths['/api/audit']['get']['responses'][200]['content']['application/json']['logs'][number];
export type Environment = 'development' | 'staging' | 'production';

export const ENVIRONMENTS: Environment[] = ['production', 'staging', 'development'];

/** A pipeline still acting on the flag (it can be advanced or aborted). */
export const isActive = (status: CanaryStatus) => status === 'running' || status === 'paused';

/** The configuration the API answers in the record, optional fields included (docs/canary.md). */
export interface CanaryConfig {
  initialRolloutPercent: number;
  targetRolloutPercent: number;
  rampStepPercent: number;
  soakPeriodMinutes: number;
  errorRateGateDelta: number;
  latencyGateDeltaMs: number;
  autoRollbackOnBreach: boolean;
  minSamplesPerCohort: number;
  maxWaitMinutes: number;
  alpha: number;
}

export function configOf(record: CanaryRecord): CanaryConfig {
  return record.config as unknown as CanaryConfig;
}

/** The stage percentages the pipeline plans (docs/canary.md: initial, then +step, the last exactly the target). */
export function plannedStages(config: CanaryConfig): number[] {
  const stages: number[] = [];
  for (let p = config.initialRolloutPercent; p < config.targetRolloutPercent; p += config.rampStepPercent) stages.push(round(p));
  stages.push(config.targetRolloutPercent);
  return stages;
}

const round = (n: number) => Math.round(n * 1000) / 1000;

export { flagReleaseHref } from '../../links';
