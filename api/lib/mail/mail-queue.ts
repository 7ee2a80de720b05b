import type { MailMessage } from '../../../activities/mail';
import type { Sql } from '../../infra/postgres';
import { startWorkflow, type Temporal } from '../../infra/temporal';
import { SEND_MAIL } from '../../../workflows/messages';

/**
 * Stores a message in Postgres and hands its id to Temporal; once started, delivery (with
 * retries) no longer depends on us. Only the id enters the workflow history: mails carry
 * one-time tokens, and Temporal's history is readable by whoever operates Temporal.
 */
export class MailQueue {
  constructor(
    private readonly temporal: Temporal,
    private readonly sql: Sql,
  ) {}

  async send(message: MailMessage, idempotencyKey: string): Promise<void> {
    const id = `mail-${idempotencyKey}`;
    // A second send with the same key finds the first message queued (or delivered): as before, the workflow id decides.
    const stored = await this.sql`
      INSERT INTO outgoing_mail (id, to_email, subject, body, token)
      VALUES (${id}, ${message.to}, ${message.subject}, ${message.text}, ${message.token ?? null})
      ON CONFLICT (id) DO NOTHING RETURNING id`;
    try {
      await startWorkflow(this.temporal, SEND_MAIL, id, { workflowId: id });
    } catch (error) {
      // No workflow will deliver it: do not keep the secret around.
      if (stored.length > 0) await this.sql`DELETE FROM outgoing_mail WHERE id = ${id}`;
      throw error;
    }
  }
}
