import { proxyActivities } from '@temporalio/workflow';
import type { MailActivities, SendMailInput } from './messages';

const { deliverMail } = proxyActivities<MailActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 12 },
});

/**
 * One workflow per message: Temporal owns the retries, the workflow id is the idempotency key
 * and the id of the stored message (outgoing_mail). The message itself never enters the
 * history: it carries one-time tokens.
 */
export async function sendMail(mailId: SendMailInput): Promise<void> {
  await deliverMail(mailId);
}
