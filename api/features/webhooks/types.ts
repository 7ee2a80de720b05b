import { CHANGE_REQUEST_EVENTS } from '../change-requests/events';
import { FLAG_EVENTS } from '../flags/types';

/** What a webhook may subscribe to: flag changes and change requests' steps (docs/api-reference.md#webhooks). */
export const WEBHOOK_EVENTS = [...FLAG_EVENTS, ...CHANGE_REQUEST_EVENTS] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/**
 * A webhook as the API returns it (docs/api-reference.md#webhooks); the secret is write-only after
 * creation.
 */
export interface WebhookRecord {
  id: string;
  projectId: string;
  url: string;
  events: WebhookEvent[];
  active: boolean;
  createdBy: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface WebhookInput {
  projectId: string;
  url: string;
  secret?: string;
  events?: WebhookEvent[];
  active?: boolean;
}

export type WebhookPatch = Partial<Pick<WebhookInput, 'url' | 'secret' | 'events' | 'active'>>;

/** What a delivery attempt needs; read fresh for every attempt so pausing or editing applies at once. */
export interface WebhookSigningTarget {
  url: string;
  secret: string;
  active: boolean;
}
