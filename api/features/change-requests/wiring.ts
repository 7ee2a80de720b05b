import type { MailMessage } from '../../../activities/mail';
import type { ListenerRoutes } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { signalWithStartWorkflow, type Temporal } from '../../infra/temporal';
import { cancelScheduledChangeSignal, rescheduleChangeSignal, SCHEDULED_CHANGE, scheduledChangeWorkflowId } from '../../../workflows/messages';
import type { FlagService } from '../flags/service';
import type { ChangeGate } from './gate';
import { changeRequestRoutes } from './routes';
import { ChangeRequestService, type ChangeSchedules, type ImpactOf } from './service';
import { ChangeRequestStore } from './store';

/** The scheduledChange workflows (workflows/scheduled-change.ts): one per request, told of a new time or a cancel by signal. */
export class TemporalChangeSchedules implements ChangeSchedules {
  constructor(private readonly temporal: Temporal) {}

  set(requestId: string, at: string): Promise<void> {
    return signalWithStartWorkflow(this.temporal, SCHEDULED_CHANGE, { requestId, at }, { workflowId: scheduledChangeWorkflowId(requestId), signal: rescheduleChangeSignal, signalArgs: [at] });
  }

  async clear(requestId: string): Promise<void> {
    await this.temporal.bounded(() => this.temporal.client.workflow.getHandle(scheduledChangeWorkflowId(requestId)).signal(cancelScheduledChangeSignal));
  }
}

export interface ChangeRequestFeature {
  routes: ListenerRoutes;
  /** What this process's worker runs the scheduled apply with. */
  service: ChangeRequestService;
}

/** Change requests (docs/change-requests.md) over the one flag write path and its gate. */
export function createChangeRequestFeature(deps: {
  sql: Sql;
  flags: FlagService;
  gate: ChangeGate;
  temporal: Temporal;
  impact?: ImpactOf;
  mail: { send(message: MailMessage, idempotencyKey: string): Promise<void> };
  logger: Logger;
}): ChangeRequestFeature {
  const service = new ChangeRequestService({
    sql: deps.sql,
    store: new ChangeRequestStore(),
    policies: deps.gate.policies,
    flags: deps.flags,
    schedules: new TemporalChangeSchedules(deps.temporal),
    impact: deps.impact,
    mail: deps.mail,
    logger: deps.logger,
  });
  return { routes: { control: changeRequestRoutes({ requests: service }) }, service };
}
