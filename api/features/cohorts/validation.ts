import { z } from 'zod';
import type { FieldProblem } from '../../http/errors';
import { NESTED_COHORT_MESSAGE, validateCondition } from '../evaluation/engine';
import { ConditionSchema } from '../flags/schema';
import { descriptionSchema, nameSchema } from '../projects/common';
import { COHORT_LIMITS, type CohortRuleInput } from './types';

/**
 * Write-time rules for cohorts: the same condition shapes and operand checks as flag targeting
 * (flags/validation.ts, engine validateCondition), minus in_cohort, within COHORT_LIMITS.
 */

/** Problems with a cohort's rules, paths relative to the body (`rules.1.conditions.0`). */
export function cohortRulesProblems(rules: readonly CohortRuleInput[]): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const ids = new Set<string>();
  let patterns = 0;
  rules.forEach((rule, i) => {
    if (rule.id !== undefined) {
      if (ids.has(rule.id)) problems.push({ path: `rules.${i}.id`, message: `duplicate rule id "${rule.id}"` });
      ids.add(rule.id);
    }
    rule.conditions.forEach((condition, j) => {
      const path = `rules.${i}.conditions.${j}`;
      if (condition.operator === 'in_cohort') problems.push({ path: `${path}.operator`, message: NESTED_COHORT_MESSAGE });
      else {
        const problem = validateCondition(condition);
        if (problem) problems.push({ path, message: problem });
      }
      // Stored as jsonb, which cannot hold NUL characters.
      if (JSON.stringify(condition).includes('\\u0000')) problems.push({ path, message: 'must not contain NUL characters' });
      if (condition.operator === 'matches') patterns++;
    });
  });
  if (patterns > COHORT_LIMITS.matchesPerCohort) {
    problems.push({ path: 'rules', message: `at most ${COHORT_LIMITS.matchesPerCohort} "matches" conditions per cohort (over all rules); this cohort has ${patterns}` });
  }
  return problems;
}

const CohortRuleSchema = z
  .object({
    id: z.string().trim().min(1).max(COHORT_LIMITS.ruleId).optional().describe('Generated when absent'),
    conditions: z.array(ConditionSchema).max(COHORT_LIMITS.conditionsPerRule).default([]).describe('All must hold; none: every context'),
  })
  .strict();

const CohortRulesSchema = z
  .array(CohortRuleSchema)
  .max(COHORT_LIMITS.rulesPerCohort)
  .describe('A context is a member when any rule matches; in_cohort is not allowed here (cohorts do not nest)')
  .superRefine((rules, ctx) => {
    for (const p of cohortRulesProblems(rules)) ctx.addIssue({ code: z.ZodIssueCode.custom, path: p.path.split('.').slice(1), message: p.message });
  });

/** Names (1-200 characters) and descriptions (up to 2,000) as every other resource of a project has them. */
const CohortName = nameSchema.describe('Unique in the project, whatever the case');
const CohortDescription = descriptionSchema;

export const CohortCreateSchema = z
  .object({
    name: CohortName,
    description: CohortDescription.optional(),
    rules: CohortRulesSchema.optional(),
  })
  .strict();

export const CohortPatchSchema = z
  .object({
    name: CohortName.optional(),
    description: CohortDescription.optional(),
    rules: CohortRulesSchema.optional(),
    version: z.number().int().positive().optional().describe('Expected current version; a stale one gets 409'),
  })
  .strict()
  .refine((patch) => patch.name !== undefined || patch.description !== undefined || patch.rules !== undefined, { message: 'Send at least one field to change' });
