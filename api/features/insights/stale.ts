import type { FlagRecord } from '../flags/types';
import { round } from './impact';

/**
 * Stale-flag scoring (docs/insights.md), without I/O. A flag is `inactive` when nothing
 * evaluated it for STALE_AFTER_DAYS, `stale` when it is settled (fully on or fully off) and
 * nobody changed it for STALE_AFTER_DAYS, `active` otherwise. The staleness score (0-100) ranks
 * cleanup candidates: up to 50 points for days without evaluations (full at 60 days), up to 30
 * for days without a change (full at 90), and 20 when the rollout is settled at 0 or 100%.
 */
export const STALE_AFTER_DAYS = 30;
/** Flags at or above this score count as potential tech debt. */
export const TECH_DEBT_SCORE = 50;
const DAY_MS = 86_400_000;

export type StaleStatus = 'active' | 'stale' | 'inactive';
export type StaleCategory = 'active' | 'in_rollout' | 'stale_rolled_out' | 'stale_rolled_back' | 'inactive_enabled' | 'inactive_disabled';

export interface StaleReportItem {
  flagKey: string;
  serviceId: string;
  environment: string;
  status: StaleStatus;
  category: StaleCategory;
  /** Days since the last evaluation; since creation for a flag never evaluated. */
  daysInactive: number;
  neverEvaluated: boolean;
  daysSinceLastMutation: number;
  rolloutPercentage: number;
  stalenessScore: number;
  recommendation: string;
  codeRemovalAdvice: string;
}

/**
 * The share of traffic that gets the flag's on-state: 0 when disabled; when enabled, the largest
 * partial rollout of a targeting rule still in progress, else 100.
 */
export function rolloutPercentage(flag: Pick<FlagRecord, 'enabled' | 'targeting'>): number {
  if (!flag.enabled) return 0;
  const partial = flag.targeting.map((r) => r.rolloutPercentage).filter((p): p is number => p !== undefined && p < 100);
  return partial.length ? Math.max(...partial) : 100;
}

export function staleReportItem(flag: FlagRecord, lastEvaluatedAtMs: number | null, nowMs: number): StaleReportItem {
  const days = (sinceMs: number) => Math.max(0, Math.floor((nowMs - sinceMs) / DAY_MS));
  const daysInactive = days(lastEvaluatedAtMs ?? Date.parse(flag.createdAt));
  const daysSinceLastMutation = days(Date.parse(flag.updatedAt));
  const rollout = rolloutPercentage(flag);
  const settled = rollout === 0 || rollout === 100;
  const stalenessScore = Math.round(
    Math.min(1, daysInactive / 60) * 50 + Math.min(1, daysSinceLastMutation / 90) * 30 + (settled ? 20 : 0),
  );

  let status: StaleStatus = 'active';
  let category: StaleCategory = settled ? 'active' : 'in_rollout';
  if (daysInactive >= STALE_AFTER_DAYS) {
    status = 'inactive';
    category = flag.enabled ? 'inactive_enabled' : 'inactive_disabled';
  } else if (settled && daysSinceLastMutation >= STALE_AFTER_DAYS) {
    status = 'stale';
    category = rollout === 100 ? 'stale_rolled_out' : 'stale_rolled_back';
  }
  return {
    flagKey: flag.key,
    serviceId: flag.serviceId,
    environment: flag.environment,
    status,
    category,
    daysInactive,
    neverEvaluated: lastEvaluatedAtMs === null,
    daysSinceLastMutation,
    rolloutPercentage: rollout,
    stalenessScore,
    ...ADVICE[category](flag.key, daysInactive, daysSinceLastMutation),
  };
}

const ADVICE: Record<StaleCategory, (key: string, inactive: number, unchanged: number) => { recommendation: string; codeRemovalAdvice: string }> = {
  active: () => ({ recommendation: 'Keep: the flag is evaluated and was changed recently.', codeRemovalAdvice: 'None yet.' }),
  in_rollout: () => ({ recommendation: 'Keep: a partial rollout is in progress; finish it (0% or 100%).', codeRemovalAdvice: 'None until the rollout is finished.' }),
  stale_rolled_out: (key, _i, unchanged) => ({
    recommendation: `Fully rolled out and unchanged for ${unchanged} days: make the new behaviour permanent.`,
    codeRemovalAdvice: `Replace every check of "${key}" with its enabled branch, delete the disabled branch, then delete the flag.`,
  }),
  stale_rolled_back: (key, _i, unchanged) => ({
    recommendation: `Off and unchanged for ${unchanged} days: the feature behind it looks abandoned.`,
    codeRemovalAdvice: `Delete the code behind "${key}" and keep the disabled branch, then delete the flag.`,
  }),
  inactive_enabled: (key, inactive) => ({
    recommendation: `No evaluations for ${inactive} days while enabled: no running code seems to ask for it.`,
    codeRemovalAdvice: `Search the code for "${key}"; if nothing references it, delete the flag, otherwise keep the enabled branch and remove the check.`,
  }),
  inactive_disabled: (key, inactive) => ({
    recommendation: `No evaluations for ${inactive} days and disabled: safe to retire.`,
    codeRemovalAdvice: `Search the code for "${key}"; delete any branch it guards and the flag.`,
  }),
};

export function staleSummary(items: StaleReportItem[]) {
  return {
    total: items.length,
    staleCount: items.filter((i) => i.status === 'stale').length,
    inactiveCount: items.filter((i) => i.status === 'inactive').length,
    launchedCount: items.filter((i) => i.rolloutPercentage === 100).length,
    potentialTechDebtFlags: items.filter((i) => i.stalenessScore >= TECH_DEBT_SCORE).length,
    averageStalenessScore: items.length ? round(items.reduce((s, i) => s + i.stalenessScore, 0) / items.length, 1) : 0,
  };
}
