import { validationFailed, type FieldProblem } from '../../http/errors';
import type { Queryable } from '../../infra/postgres';
import type { CohortStore } from '../cohorts/store';
import type { CohortDefinition } from '../evaluation/engine';
import { cohortInProcessProblems, inProcessIssues, locatedInProcessIssues, type TranslatableFlag } from '../flagd/translate';
import type { FlagRecord, InProcessCompatibility } from './types';

/**
 * In-process compatibility of flags (docs/flagd.md#compatibility): derived from a flag's
 * targeting and the cohorts it names on every read, never stored; and the write-time refusal of
 * projects with requireInProcessCompatible.
 */

type Cohorts = ReadonlyMap<string, CohortDefinition>;

/** Where the cohorts flags name are read. */
export type CohortReader = Pick<CohortStore, 'list' | 'flagsUsing'>;

const NO_COHORTS: Cohorts = new Map();

function namesCohort(flag: { targeting: FlagRecord['targeting'] }): boolean {
  return flag.targeting.some((rule) => rule.conditions.some((condition) => condition.operator === 'in_cohort'));
}

/** The cohorts of every project whose flags (among `flags`) name one: one query per such project. */
async function cohortsOfProjects(
  db: Queryable,
  reader: CohortReader,
  flags: readonly { projectId: string; targeting: FlagRecord['targeting'] }[],
): Promise<Map<string, Cohorts>> {
  const projects = new Set(flags.filter(namesCohort).map((flag) => flag.projectId));
  const out = new Map<string, Cohorts>();
  for (const projectId of projects) {
    const cohorts = await reader.list(db, projectId);
    out.set(projectId, new Map(cohorts.map((cohort) => [cohort.id, cohort])));
  }
  return out;
}

/** The flags as the API returns them: each with `inProcessCompatible` and `inProcessIssues`. */
export async function withInProcessCompatibility<T extends FlagRecord>(db: Queryable, reader: CohortReader, flags: readonly T[]): Promise<(T & InProcessCompatibility)[]> {
  const cohorts = await cohortsOfProjects(db, reader, flags);
  return flags.map((flag) => {
    const issues = inProcessIssues(flag, cohorts.get(flag.projectId) ?? NO_COHORTS);
    return { ...flag, inProcessCompatible: issues.length === 0, inProcessIssues: issues };
  });
}

/** A flag as a write will leave it. */
export type WrittenContent = TranslatableFlag & { projectId: string; targeting: FlagRecord['targeting'] };

/** Projects among `projectIds` that refuse untranslatable targeting. */
async function protectedProjects(db: Queryable, projectIds: string[]): Promise<Set<string>> {
  if (projectIds.length === 0) return new Set();
  const rows = await db<{ id: string }[]>`SELECT id FROM projects WHERE id IN ${db(projectIds)} AND require_in_process_compatible`;
  return new Set(rows.map((row) => row.id));
}

/**
 * The write-time check (in the write's transaction): in a project with
 * requireInProcessCompatible, a flag whose targeting flagd cannot evaluate exactly is refused,
 * 400 with the path of each offending condition.
 */
export async function assertInProcessCompatible(db: Queryable, reader: CohortReader, flags: readonly WrittenContent[]): Promise<void> {
  const guarded = await protectedProjects(db, [...new Set(flags.map((flag) => flag.projectId))]);
  if (guarded.size === 0) return;
  const checked = flags.filter((flag) => guarded.has(flag.projectId));
  const cohorts = await cohortsOfProjects(db, reader, checked);
  const problems = new Map<string, FieldProblem>();
  for (const flag of checked) {
    for (const issue of locatedInProcessIssues(flag, cohorts.get(flag.projectId) ?? NO_COHORTS)) {
      // A create in every environment writes the same content three times: one problem each.
      problems.set(`${issue.path}\n${issue.message}`, { path: issue.path, message: `${issue.message} (this project requires flags that in-process providers can evaluate)` });
    }
  }
  if (problems.size > 0) throw validationFailed([...problems.values()]);
}

/** Whether the project refuses untranslatable targeting. */
async function requiresInProcessCompatible(db: Queryable, projectId: string): Promise<boolean> {
  return (await protectedProjects(db, [projectId])).has(projectId);
}

/**
 * The cohort side of the write-time check (in the cohort write's transaction): in a project with
 * requireInProcessCompatible, a cohort change that would leave a flag naming the cohort
 * untranslatable is refused, 400 with the path of each offending cohort condition. A cohort no
 * flag names may hold anything: a flag naming it later is checked then.
 */
export async function assertCohortInProcessCompatible(db: Queryable, reader: CohortReader, projectId: string, cohort: CohortDefinition): Promise<void> {
  const problems = cohortInProcessProblems(cohort);
  if (problems.length === 0 || !(await requiresInProcessCompatible(db, projectId))) return;
  const users = await reader.flagsUsing(db, projectId, cohort.id);
  if (users.length === 0) return;
  const named = users.map((user) => `${user.key} (${user.environment})`).join(', ');
  throw validationFailed(
    problems.map((problem) => ({ path: problem.path, message: `${problem.message}: flags ${named} name this cohort and this project requires flags that in-process providers can evaluate` })),
  );
}
