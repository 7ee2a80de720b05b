import type { Sql } from '../../infra/postgres';
import { CHANGE_REQUEST_ALERTS_CONSUMER, type ChangeRequestEvent } from '../../lib/outbox/store';
import type { NotifyOrgAlertChannels, OrgAlert } from '../alert-channels/types';
import type { FlagChangeEvent } from '../flags/types';
import type { ChangeRequestEventName } from './events';
import type { ChangeRequest } from './schema';

const WHAT: Record<ChangeRequestEventName, string> = {
  'change_request.created': 'opened',
  'change_request.updated': 'edited (approvals voided)',
  'change_request.approved': 'approved',
  'change_request.rejected': 'rejected',
  'change_request.cancelled': 'cancelled',
  'change_request.applied': 'applied',
  'change_request.failed': 'failed',
};

/**
 * The outbox consumer that tells the organization's alert channels of every change request step
 * (docs/change-requests.md#webhooks-and-audit); it receives change request events only. The alert's
 * id is the event's, so a retried event notifies each channel once.
 */
export class ChangeRequestAlerts {
  readonly name = CHANGE_REQUEST_ALERTS_CONSUMER;

  constructor(private readonly deps: { sql: Sql; notifyOrgAlertChannels: NotifyOrgAlertChannels }) {}

  async handle(event: FlagChangeEvent | ChangeRequestEvent): Promise<void> {
    if (!('changeRequestId' in event.data)) return;
    const data = event.data;
    const [project] = await this.deps.sql<{ org_id: string; name: string }[]>`SELECT org_id, name FROM projects WHERE id = ${data.projectId}`;
    if (!project) return;
    const request = data.changeRequest as Pick<ChangeRequest, 'id' | 'title' | 'status' | 'changes' | 'failureReason' | 'createdByName' | 'scheduledAt'>;
    const name = event.event as ChangeRequestEventName;
    const environments = [...new Set(request.changes.map((c) => c.environment))];
    const alert: OrgAlert = {
      id: event.id,
      kind: name,
      title: `[${project.name}] change request "${request.title}" ${WHAT[name] ?? name}`,
      summary: `${request.changes.length} change${request.changes.length === 1 ? '' : 's'} to ${environments.join(', ')}, by ${request.createdByName}; status ${request.status}${request.failureReason ? `: ${request.failureReason}` : ''}.`,
      severity: name === 'change_request.failed' ? 'warning' : 'info',
      timestamp: event.timestamp,
      projectId: data.projectId,
      environment: environments.length === 1 ? environments[0] : undefined,
      details: { changeRequestId: request.id, status: request.status, ...(request.scheduledAt ? { scheduledAt: request.scheduledAt } : {}) },
    };
    await this.deps.notifyOrgAlertChannels(project.org_id, alert);
  }
}
