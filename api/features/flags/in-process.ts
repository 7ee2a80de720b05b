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

/** A flag as a write will leave it, and as it was (none for a create). */
export interface WrittenContent {
  after: TranslatableFlag & { projectId: string; targeting: FlagRecord['targeting'] };
  before: TranslatableFlag | null;
}

/**
 * What a write adds to `before`: the entries of `after` beyond those `before` already has, by
 * `identity` and counted (a rule that gains a second `matches` gains one issue).
 */
function added<T>(before: readonly T[], after: readonly T[], identity: (entry: T) => string): T[] {
  const had = new Map<string, number>();
  for (const entry of before) had.set(identity(entry), (had.get(identity(entry)) ?? 0) + 1);
  return after.filter((entry) => {
    const left = had.get(identity(entry)) ?? 0;
    had.set(identity(entry), left - 1);
    return left <= 0;
  });
}

/** The same issue before and after a write, wherever its rule moved. */
const issueIdentity = (issue: { ruleId: string | null; operator: string | null; message: string }) => `${issue.ruleId}\n${issue.operator}\n${issue.message}`;

/** Projects among `projectIds` that refuse untranslatable targeting. */
async function protectedProjects(db: Queryable, projectIds: string[]): Promise<Set<string>> {
  if (projectIds.length === 0) return new Set();
  const rows = await db<{ id: string }[]>`SELECT id FROM projects WHERE id IN ${db(projectIds)} AND require_in_process_compatible`;
  return new Set(rows.map((row) => row.id));
}

/**
 * The write-time check (in the write's transaction): in a project with
 * requireInProcessCompatible, a write that makes a flag's targeting untranslatable is refused,
 * 400 with the path of each offending condition. Issues the flag already had do not count: a
 * flag written before the setting was turned on can still be toggled and edited elsewhere.
 */
export async function assertInProcessCompatible(db: Queryable, reader: CohortReader, writes: readonly WrittenContent[]): Promise<void> {
  const guarded = await protectedProjects(db, [...new Set(writes.map((write) => write.after.projectId))]);
  if (guarded.size === 0) return;
  const checked = writes.filter((write) => guarded.has(write.after.projectId));
  const cohorts = await cohortsOfProjects(
    db,
    reader,
    checked.map((write) => write.after),
  );
  const problems = new Map<string, FieldProblem>();
  for (const { after, before } of checked) {
    const projectCohorts = cohorts.get(after.projectId) ?? NO_COHORTS;
    const had = before === null ? [] : locatedInProcessIssues(before, projectCohorts);
    for (const issue of added(had, locatedInProcessIssues(after, projectCohorts), issueIdentity)) {
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
 * requireInProcessCompatible, a cohort change that would make a flag naming the cohort
 * untranslatable is refused, 400 with the path of each offending cohort condition. A cohort no
 * flag names may hold anything: a flag naming it later is checked then. Problems the cohort
 * already had do not count, as for flags.
 */
export async function assertCohortInProcessCompatible(
  db: Queryable,
  reader: CohortReader,
  projectId: string,
  change: { before: CohortDefinition; after: CohortDefinition },
): Promise<void> {
  const cohort = change.after;
  const problems = added(cohortInProcessProblems(change.before), cohortInProcessProblems(cohort), (problem) => problem.message);
  if (problems.length === 0 || !(await requiresInProcessCompatible(db, projectId))) return;
  const users = await reader.flagsUsing(db, projectId, cohort.id);
  if (users.length === 0) return;
  const named = users.map((user) => `${user.key} (${user.environment})`).join(', ');
  throw validationFailed(
    problems.map((problem) => ({ path: problem.path, message: `${problem.message}: flags ${named} name this cohort and this project requires flags that in-process providers can evaluate` })),
  );
}
