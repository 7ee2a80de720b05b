/**
 * Shared shapes of the flag domain: the API record (docs/api-reference.md#flags) and the change
 * event every mutation publishes on the bus after commit (outbox relay -> Redis pub/sub -> every
 * replica). Snapshots, SSE/gRPC streams, webhooks and notifications all consume FlagChangeEvent.
 */

export const ENVIRONMENTS = ['development', 'staging', 'production'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];
export const FLAG_TYPES = ['boolean', 'string', 'number', 'object'] as const;
export type FlagType = (typeof FLAG_TYPES)[number];

export interface FlagVariant {
  name: string;
  value: unknown;
  weight: number;
}

export interface FlagCondition {
  property: string;
  operator: string;
  value?: unknown;
}

export interface FlagTargetingRule {
  id: string;
  conditions: FlagCondition[];
  value: unknown;
  rolloutPercentage?: number;
}

/** A flag as the API returns it. */
export interface FlagRecord {
  id: string;
  projectId: string;
  serviceId: string;
  environment: Environment;
  key: string;
  name: string;
  description: string;
  type: FlagType;
  enabled: boolean;
  defaultValue: unknown;
  tags: string[];
  variants: FlagVariant[];
  targeting: FlagTargetingRule[];
  isPublic: boolean;
  version: number;
  createdAt: string;
  updatedAt: string;
}

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

/** The fields a write may change; everything else (id, key, service, environment …) is fixed. */
export const FLAG_CONTENT_FIELDS = ['name', 'description', 'type', 'enabled', 'defaultValue', 'tags', 'variants', 'targeting', 'isPublic'] as const;
export type FlagContentField = (typeof FLAG_CONTENT_FIELDS)[number];
export type FlagContent = Pick<FlagRecord, FlagContentField>;

/** A targeting rule as written: the id may be omitted and is then generated. */
export type FlagTargetingRuleInput = Omit<FlagTargetingRule, 'id'> & { id?: string };

/** PATCH input: only the given fields change. */
export type FlagPatch = Partial<Omit<FlagContent, 'targeting'>> & { targeting?: FlagTargetingRuleInput[] };

/**
 * Create input. Without `environment` the flag is created in every environment
 * (docs/api-reference.md#flags).
 */
export type FlagCreateInput = FlagPatch & {
  key: string;
  serviceId: string;
  environment?: Environment;
  /** Optional; when given it must be the service's project. */
  projectId?: string;
};

export const FLAG_CHANGE_TYPES = ['create', 'update', 'toggle', 'delete', 'rollback'] as const;
export type FlagChangeType = (typeof FLAG_CHANGE_TYPES)[number];

/** One entry of a flag's history: the full flag as it was after that change. */
export interface FlagVersionRecord {
  id: string;
  version: number;
  changeType: FlagChangeType;
  snapshot: FlagRecord;
  actor: string;
  userId: string | null;
  createdAt: string;
}
