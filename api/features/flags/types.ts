import type { z } from 'zod';
import type { Environment } from '../../domain/environments';
import type {
  ConditionSchema,
  FLAG_CHANGE_TYPES,
  FlagContentPatchSchema,
  FlagContentSchema,
  FlagCreateSchema,
  FlagRecordSchema,
  FlagTypeSchema,
  FlagResponseSchema,
  FlagVersionSchema,
  NamedFlagVersionSchema,
  InProcessCompatibilitySchema,
  TargetingRuleInputSchema,
  TargetingRuleSchema,
  VariantSchema,
} from './schema';

/**
 * Shared types of the flag domain: the shapes inferred from ./schema.ts, and the change event
 * every mutation publishes on the bus after commit (outbox relay -> Redis pub/sub -> every
 * replica). Snapshots, SSE/gRPC streams, webhooks and notifications all consume FlagChangeEvent.
 */

export type FlagType = z.infer<typeof FlagTypeSchema>;
export type FlagVariant = z.infer<typeof VariantSchema>;
export type FlagCondition = z.infer<typeof ConditionSchema>;
export type FlagTargetingRule = z.infer<typeof TargetingRuleSchema>;
/** A targeting rule as written: the id may be omitted and is then generated. */
export type FlagTargetingRuleInput = z.infer<typeof TargetingRuleInputSchema>;
/** A flag as the API returns it. */
export type FlagRecord = z.infer<typeof FlagRecordSchema>;
export type InProcessCompatibility = z.infer<typeof InProcessCompatibilitySchema>;
export type FlagResponse = z.infer<typeof FlagResponseSchema>;
/** The fields a write may change; everything else (id, key, service, environment …) is fixed. */
export type FlagContent = z.infer<typeof FlagContentSchema>;
export type FlagContentField = keyof FlagContent;
/** PATCH input: only the given fields change. */
export type FlagPatch = z.infer<typeof FlagContentPatchSchema>;
/** Create input. Without `environment` the flag is created in every environment. */
export type FlagCreateInput = z.infer<typeof FlagCreateSchema>;
export type FlagChangeType = (typeof FLAG_CHANGE_TYPES)[number];
/** One entry of a flag's history: the full flag as it was after that change. */
export type FlagVersionRecord = z.infer<typeof FlagVersionSchema>;
export type NamedFlagVersion = z.infer<typeof NamedFlagVersionSchema>;

export const FLAG_EVENTS = ['flag.created', 'flag.updated', 'flag.deleted', 'flag.toggled'] as const;
export type FlagEventName = (typeof FLAG_EVENTS)[number];

/** Redis pub/sub channel (prefixed by the cache) carrying FlagChangeEvent JSON. */
export const FLAG_CHANGES_CHANNEL = 'bus:flag-changes';

export interface FlagChangeEvent {
  /** Outbox event id: consumers de-duplicate on it. */
  id: string;
  event: FlagEventName;
  /**
   * ISO time of the change; with event and data.flagKey it identifies a webhook delivery
   * (docs/api-reference.md#webhooks).
   */
  timestamp: string;
  /** The webhook envelope's `data` (docs/api-reference.md#webhooks). */
  data: {
    flagKey: string;
    projectId: string;
    serviceId: string;
    environment: Environment;
    changes: Record<string, { from: unknown; to: unknown }>;
  };
  /** The flag after the change; null when deleted. */
  flag: FlagRecord | null;
  /** Who made it (audit actor name) — for notifications to skip the author. */
  actor: string;
  actorUserId: string | null;
}

/**
 * Identifies one flag: a flag is unique per (serviceId, environment, key)
 * (docs/api-reference.md#flags).
 */
export interface FlagRef {
  key: string;
  serviceId: string;
  environment: Environment;
}
