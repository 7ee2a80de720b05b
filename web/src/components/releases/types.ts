/** The release-safety shapes the pages share, taken from the generated API types (schema.d.ts). */
import type { paths } from '../../api/client';

export type CanaryRecord = paths['/api/flags/{key}/canary']['get']['responses'][200]['content']['application/json'];
export type CanaryStage = CanaryRecord['completedStages'][number];
export type CanaryGate = NonNullable<CanaryStage['gate']>;
export type CanaryStatus = CanaryRecord['status'];
export type AuditEntry = paths['/api/audit']['get']['responses'][200]['content']['application/json']['logs'][number];
export type { Environment } from '../../api/environments';

/** A pipeline still acting on the flag (it can be advanced or aborted). */
export const isActive = (status: CanaryStatus) => status === 'running' || status === 'paused';

/** The configuration a record carries: the start request's settings with the API's defaults filled in. */
export type CanaryConfig = CanaryRecord['config'];

/** The stage percentages the pipeline plans (docs/canary.md: initial, then +step, the last exactly the target). */
export function plannedStages(config: CanaryConfig): number[] {
  const stages: number[] = [];
  for (let p = config.initialRolloutPercent; p < config.targetRolloutPercent; p += config.rampStepPercent) stages.push(round(p));
  stages.push(config.targetRolloutPercent);
  return stages;
}

const round = (n: number) => Math.round(n * 1000) / 1000;

export { flagReleaseHref } from '../../links';
