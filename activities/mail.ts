import nodemailer from 'nodemailer';
import type { Sql } from '../api/infra/postgres';
import type { MailActivities } from '../workflows/messages';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** A one-time token carried by the mail (verification, invitation); shown in the dev mailbox. */
  token?: string;
}

export interface MailDeps {
  sql: Sql;
  smtpUrl?: string;
  from: string;
}

/**
 * SMTP when SMTP_URL is set, else the dev mailbox table. The message is read from outgoing_mail
 * (MailQueue stored it; the workflow carries only its id) and deleted once delivered, so a retry
 * after a lost completion finds nothing left to send, and no secret outlives its delivery. SMTP
 * itself may still see a retry when the process dies between sending and deleting.
 */
export function createMailActivities(deps: MailDeps): MailActivities {
  const transport = deps.smtpUrl ? nodemailer.createTransport(deps.smtpUrl as string) : undefined;
  return {
    async deliverMail(mailId: string): Promise<void> {
      const [message] = await deps.sql<{ to_email: string; subject: string; body: string; token: string | null }[]>`
        SELECT to_email, subject, body, token FROM outgoing_mail WHERE id = ${mailId}`;
      if (!message) return;
      if (transport) {
        await transport.sendMail({
          from: deps.from,
          to: message.to_email,
          subject: message.subject,
          text: message.body,
          messageId: `<${mailId}@flags>`,
        });
        await deps.sql`DELETE FROM outgoing_mail WHERE id = ${mailId}`;
        return;
      }
      await deps.sql.begin(async (tx) => {
        await tx`
          INSERT INTO dev_mailbox (id, to_email, subject, body, token)
          VALUES (${mailId}, ${message.to_email}, ${message.subject}, ${message.body}, ${message.token})
          ON CONFLICT (id) DO NOTHING`;
        await tx`DELETE FROM outgoing_mail WHERE id = ${mailId}`;
      });
    },
  };
}
