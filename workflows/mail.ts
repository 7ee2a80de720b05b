import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { MailActivities, MailMessage } from '../activities/mail';

const { deliverMail } = proxyActivities<MailActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 12 },
});

/** One workflow per message: Temporal owns the retries, the workflow id is the idempotency key. */
export async function sendMail(message: MailMessage): Promise<void> {
  await deliverMail(message, workflowInfo().workflowId);
}
