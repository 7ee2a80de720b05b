import type { Environment } from '../../domain/environments';

export const TRIGGER_ACTIONS = ['enable', 'disable', 'toggle'] as const;
export type TriggerAction = (typeof TRIGGER_ACTIONS)[number];

/**
 * A flag trigger (docs/api-reference.md#triggers) as the API returns it: never the token or its
 * hash.
 */
export interface TriggerRecord {
  id: string;
  name: string;
  action: TriggerAction;
  flagKey: string;
  serviceId: string;
  environment: Environment;
  projectId: string;
  createdBy: string | null;
  createdAt: string;
  lastExecutedAt: string | null;
  executionCount: number;
  revokedAt: string | null;
}

/** Executions per token per minute (docs/limits.md). */
export const TRIGGER_RATE_LIMIT = 30;
export const TRIGGER_RATE_WINDOW_SECONDS = 60;
