import { validationFailed, type FieldProblem } from '../../http/errors';
import type { TransactionSql } from '../../infra/postgres';
import type { FlagCondition } from '../flags/types';
import { lockExistingCohorts } from './store';

type Rules = readonly { conditions: readonly FlagCondition[] }[];

/** One flag's targeting as a write sets it, and as it was (null for a new flag). */
export interface TargetingWrite {
  projectId: string;
  targeting: Rules;
  before: Rules | null;
}

/** Each in_cohort condition: the cohort id it names and where it is. */
function* cohortConditions(rules: Rules): Iterable<{ cohortId: string; path: string }> {
  for (let i = 0; i < rules.length; i++) {
    const conditions = rules[i].conditions;
    for (let j = 0; j < conditions.length; j++) {
      const { operator, value } = conditions[j];
      if (operator === 'in_cohort' && typeof value === 'string') yield { cohortId: value, path: `targeting.${i}.conditions.${j}.value` };
    }
  }
}

/**
 * The existence check of the flag write path (in its transaction): every cohort an in_cohort
 * condition newly names must be a cohort of the flag's project, else 400 with the field path.
 * References the flag already had are not checked again: a cohort in use cannot be deleted.
 * Costs nothing for writes without in_cohort (no query).
 */
export async function assertCohortsExist(tx: TransactionSql, writes: readonly TargetingWrite[]): Promise<void> {
  const named = new Map<string, { cohortId: string; path: string }[]>();
  for (const write of writes) {
    const had = new Set<string>();
    if (write.before) for (const c of cohortConditions(write.before)) had.add(c.cohortId);
    for (const c of cohortConditions(write.targeting)) {
      if (had.has(c.cohortId)) continue;
      const list = named.get(write.projectId);
      if (list) list.push(c);
      else named.set(write.projectId, [c]);
    }
  }
  if (!named.size) return;
  const problems: FieldProblem[] = [];
  for (const [projectId, conditions] of named) {
    const existing = await lockExistingCohorts(tx, projectId, [...new Set(conditions.map((c) => c.cohortId))]);
    for (const c of conditions) {
      if (!existing.has(c.cohortId)) problems.push({ path: c.path, message: `no cohort ${JSON.stringify(c.cohortId)} in this flag's project` });
    }
  }
  if (problems.length) throw validationFailed(problems);
}
