import type { Environment } from '../../domain/environments';

export const TRIGGER_ACTIONS = ['enable', 'disable', 'toggle'] as const;
export type TriggerAction = (typeof TRIGGER_ACTIONS)[number];

/** A flag trigger (spec 2.8) as the API returns it: never the token or its hash. */
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

/** Spec 8: executions per token per minute. */
export const TRIGGER_RATE_LIMIT = 30;
export const TRIGGER_RATE_WINDOW_SECONDS = 60;
