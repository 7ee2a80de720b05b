/**
 * How the flags area shows and remembers environments: a badge that names the environment (production
 * in a colour of its own too, it serves real users), the environment last chosen per project (used
 * when an address names none), and what each environment's record serves compared with another's.
 */
import './environments.css';
import { sameJson, type Environment, type FlagRecord } from './model';

const storageKey = (projectId: string) => `flags.environment.${projectId}`;

/** The environment the user last chose in this project; development before any choice. */
export function rememberedEnvironment(projectId: string): Environment {
  try {
    const stored = localStorage.getItem(storageKey(projectId));
    return stored === 'staging' || stored === 'production' ? stored : 'development';
  } catch {
    // Storage can be refused (private modes): the first environment then.
    return 'development';
  }
}

export function rememberEnvironment(projectId: string, environment: Environment) {
  try {
    localStorage.setItem(storageKey(projectId), environment);
  } catch {
    // Not remembered: the next address without an environment opens development.
  }
}

export function EnvironmentBadge({ environment }: { environment: Environment }) {
  return <span className={`fl-env-badge fl-env-${environment}`}>{environment === 'production' ? 'production · live' : environment}</span>;
}

/** The option text of an environment picker: production says it is live (an <option> holds no badge). */
export const environmentOption = (environment: Environment) => (environment === 'production' ? 'production (live)' : environment);

/** The rules that can serve someone: a 0% rollout matches nobody. */
export const matchingRules = (flag: FlagRecord) => flag.targeting.filter((rule) => rule.rolloutPercentage !== 0);

/** Whether the record serves anything but its default value to anyone (a rule or a weighted variant with another value). */
export function servesBeyondDefault(flag: FlagRecord): boolean {
  const other = (value: unknown) => !sameJson(value, flag.defaultValue);
  return matchingRules(flag).some((rule) => other(rule.value)) || flag.variants.some((variant) => variant.weight > 0 && other(variant.value));
}

/** What decides who gets what, without the generated rule ids (each environment's copy has its own). */
export const servingContent = (flag: FlagRecord) => ({
  defaultValue: flag.defaultValue,
  variants: flag.variants,
  targeting: flag.targeting.map((rule) => ({ conditions: rule.conditions, value: rule.value, rolloutPercentage: rule.rolloutPercentage })),
});

export const sameServing = (a: FlagRecord, b: FlagRecord) => sameJson(servingContent(a), servingContent(b));

export const ruleCount = (flag: FlagRecord) => `${flag.targeting.length} ${flag.targeting.length === 1 ? 'rule' : 'rules'}`;
