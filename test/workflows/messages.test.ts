import { detachedTemporal, startWorkflow } from '../../api/infra/temporal';
import * as registered from '../../workflows';
import { DELIVER_OUTBOUND, INVITATION_EXPIRY, SEND_MAIL } from '../../workflows/messages';

/**
 * The workflow messages against what the worker registers, and the start boundary: an input
 * its schema refuses never reaches Temporal. A detached Temporal throws on any use of its
 * client, so "not opened" proves a start got past the check and "invalid input" that it did not.
 */
const temporal = detachedTemporal({ namespace: 'default', taskQueue: 'messages-test' });

it('names a workflow the worker registers for every message', () => {
  for (const message of [SEND_MAIL, INVITATION_EXPIRY, DELIVER_OUTBOUND]) {
    expect(typeof (registered as Record<string, unknown>)[message.name]).toBe('function');
  }
});

it('refuses a bad input before it reaches Temporal', async () => {
  await expect(startWorkflow(temporal, SEND_MAIL, '', { workflowId: 'mail-x' })).rejects.toThrow(/invalid input for workflow sendMail/);
  await expect(startWorkflow(temporal, INVITATION_EXPIRY, { invitationId: 'inv_1', extra: 1 } as never, { workflowId: 'w' })).rejects.toThrow(
    /invalid input for workflow invitationExpiry/,
  );
  await expect(startWorkflow(temporal, DELIVER_OUTBOUND, { deliveryId: 'whd:1', maxAttempts: 1.5 }, { workflowId: 'w' })).rejects.toThrow(/maxAttempts/);
});

it('passes a good input on to Temporal', async () => {
  await expect(startWorkflow(temporal, SEND_MAIL, 'mail-x', { workflowId: 'mail-x' })).rejects.toThrow(/not opened/);
  await expect(startWorkflow(temporal, DELIVER_OUTBOUND, { deliveryId: 'whd:1' }, { workflowId: 'whd:1' })).rejects.toThrow(/not opened/);
  await expect(startWorkflow(temporal, INVITATION_EXPIRY, { invitationId: 'inv_1' }, { workflowId: 'w' })).rejects.toThrow(/not opened/);
});
