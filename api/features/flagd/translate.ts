import type { CohortDefinition, FlagDefinition } from '../evaluation/engine/index';

/**
 * Our flags as a flagd flag-definition document (docs/flagd.md): what the flagd sync service
 * streams to in-process providers and relays. Variant names: our variants by name, a rule's
 * value as `rule:<ruleId>`, the flag's default value as `default`, a disabled flag's value as
 * `disabled`.
 */

export const FLAGD_SCHEMA_URL = 'https://flagd.dev/schema/v0/flags.json';

export type FlagdState = 'ENABLED' | 'DISABLED';

export interface FlagdFlag {
  state: FlagdState;
  variants: Record<string, unknown>;
  defaultVariant: string;
  targeting?: unknown;
  metadata: Record<string, string | number | boolean>;
}

export interface FlagdDocument {
  $schema: string;
  flags: Record<string, FlagdFlag>;
  $evaluators?: Record<string, unknown>;
}

/** The part of a stored flag the translation reads. */
export type TranslatableFlag = FlagDefinition & { version: number };

/** Why a flag cannot be evaluated exactly in-process: one entry per offending condition. */
export interface InProcessIssue {
  ruleId: string;
  operator: string;
  message: string;
}

export const DEFAULT_VARIANT = 'default';
export const DISABLED_VARIANT = 'disabled';

/** A flag without targeting rules or weighted variants: its default, or `disabled`. */
function staticFlag(flag: TranslatableFlag): FlagdFlag {
  const served = flag.enabled ? DEFAULT_VARIANT : DISABLED_VARIANT;
  return {
    state: 'ENABLED',
    variants: { [served]: flag.defaultValue },
    defaultVariant: served,
    metadata: { flagKey: flag.key, version: flag.version, type: flag.type },
  };
}

/** The flagd document of a flag set, with the cohorts its in_cohort conditions name. */
export function toFlagdDocument(flags: Iterable<TranslatableFlag>, cohorts: ReadonlyMap<string, CohortDefinition>): FlagdDocument {
  void cohorts;
  const out: Record<string, FlagdFlag> = {};
  for (const flag of flags) out[flag.key] = staticFlag(flag);
  return { $schema: FLAGD_SCHEMA_URL, flags: out };
}
