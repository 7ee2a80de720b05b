import type { Environment } from '../../domain/environments';
import type { FieldChange } from '../audit/writer';

export interface WatchTarget {
  serviceId: string;
  environment: Environment;
  flagKey: string;
}

/**
 * One audit entry on a watched flag made by someone else
 * (docs/api-reference.md#watching-and-notifications): the audit fields
 * (docs/api-reference.md#audit-log) minus the author's IP address and user agent, plus the flag it
 * concerns and `read`.
 */
export interface NotificationRecord {
  id: string;
  projectId: string;
  serviceId: string;
  environment: Environment;
  flagKey: string;
  userId: string | null;
  actor: string;
  action: string;
  resourceType: string;
  resourceId: string;
  resourceName: string | null;
  changes: FieldChange[];
  metadata: Record<string, unknown>;
  timestamp: string;
  read: boolean;
}
