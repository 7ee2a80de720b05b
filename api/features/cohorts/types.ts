import type { FlagCondition } from '../flags/types';

/**
 * Cohorts (docs/cohorts.md): named audiences of a project that flags reuse with the
 * `in_cohort` operator. A context is a member when any rule's conditions all hold.
 */

export interface CohortRule {
  id: string;
  conditions: FlagCondition[];
}

/** A cohort as the API returns it. */
export interface CohortRecord {
  id: string;
  projectId: string;
  name: string;
  description: string;
  rules: CohortRule[];
  /** Rises by one on every change; snapshots fold it into the ETag of the flags that use the cohort. */
  version: number;
  createdAt: string;
  updatedAt: string;
  /** Audit actor names of who created it and who changed it last. */
  createdBy: string;
  updatedBy: string;
}

/** A rule as written: the id may be omitted and is then generated. */
export type CohortRuleInput = Omit<CohortRule, 'id'> & { id?: string };

export interface CohortInput {
  name: string;
  description?: string;
  rules?: CohortRuleInput[];
}

export type CohortPatch = Partial<CohortInput>;

/**
 * Limits in the style of the flag content limits of docs/limits.md (docs/cohorts.md). A flag pays
 * for the conditions of every cohort it names on each evaluation (budget.ts), so these keep one
 * cohort about as heavy as one large targeting rule set.
 */
export const COHORT_LIMITS = {
  cohortsPerProject: 100,
  rulesPerCohort: 50,
  conditionsPerRule: 50,
  /** `matches` conditions over all rules of a cohort, as per flag (regex-safety.ts). */
  matchesPerCohort: 20,
  ruleId: 128,
} as const;

export const COHORT_EVENTS = ['cohort.created', 'cohort.updated', 'cohort.deleted'] as const;
export type CohortEventName = (typeof COHORT_EVENTS)[number];

/** Redis pub/sub channel (prefixed by the cache) carrying CohortChangeEvent JSON to every replica's snapshots. */
export const COHORT_CHANGES_CHANNEL = 'bus:cohort-changes';

/**
 * What a cohort write puts in the outbox (in its transaction) and the relay publishes on
 * COHORT_CHANGES_CHANNEL. Only the bus consumer receives it: webhooks and other flag consumers
 * hear of cohort changes through nothing (the flags themselves did not change).
 */
export interface CohortChangeEvent {
  /** Outbox event id: consumers de-duplicate on it. */
  id: string;
  event: CohortEventName;
  timestamp: string;
  projectId: string;
  cohortId: string;
  /** The cohort's version after the change (a deletion takes the next one). */
  version: number;
  /** The cohort after the change; null when deleted. */
  cohort: CohortRecord | null;
  actor: string;
  actorUserId: string | null;
}

/** Outbox payloads are flag events unless their name says cohort (they share the outbox table). */
export function isCohortChangeEvent(event: { event: string }): boolean {
  return event.event.startsWith('cohort.');
}
