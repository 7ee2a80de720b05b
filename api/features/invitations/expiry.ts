import { WorkflowNotFoundError } from '@temporalio/common';
import type { Logger } from '../../infra/logger';
import { startWorkflow, type Temporal } from '../../infra/temporal';
import { INVITATION_EXPIRY, invitationSettledSignal } from '../../../workflows/messages';

/** The Temporal side of invitations: one durable 7-day timer per invitation. */
export class InvitationExpiryTimers {
  constructor(
    private readonly temporal: Temporal,
    private readonly logger: Logger,
  ) {}

  static workflowId(invitationId: string): string {
    return `invitation-expiry-${invitationId}`;
  }

  async start(invitationId: string): Promise<void> {
    await startWorkflow(this.temporal, INVITATION_EXPIRY, { invitationId }, { workflowId: InvitationExpiryTimers.workflowId(invitationId) });
  }

  /**
   * Ends the timer early after accept or cancel. Best effort: if the signal is lost the timer
   * fires later and its activity leaves the settled invitation alone.
   */
  async settle(invitationIds: string[]): Promise<void> {
    await Promise.all(
      invitationIds.map(async (id) => {
        try {
          await this.temporal.bounded(() => this.temporal.client.workflow.getHandle(InvitationExpiryTimers.workflowId(id)).signal(invitationSettledSignal));
        } catch (error) {
          if (!(error instanceof WorkflowNotFoundError)) this.logger.warn({ err: error, invitationId: id }, 'could not signal invitation expiry workflow');
        }
      }),
    );
  }
}
