import type { MailMessage } from '../../../activities/mail';
import type { Temporal } from '../../infra/temporal';
import type { sendMail } from '../../../workflows/mail';

/** Hands a message to Temporal; once started, delivery (with retries) no longer depends on us. */
export class MailQueue {
  constructor(private readonly temporal: Temporal) {}

  async send(message: MailMessage, idempotencyKey: string): Promise<void> {
    await this.temporal.client.workflow.start<typeof sendMail>('sendMail', {
      workflowId: `mail-${idempotencyKey}`,
      taskQueue: this.temporal.taskQueue,
      args: [message],
    });
  }
}
