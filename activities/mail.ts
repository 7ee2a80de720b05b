import nodemailer from 'nodemailer';
import type { Sql } from '../api/infra/postgres';

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

export type MailActivities = ReturnType<typeof createMailActivities>;

/**
 * SMTP when SMTP_URL is set, else the dev mailbox table. The workflow id keys the message, so a
 * retried activity cannot store it twice (SMTP itself may still see a retry after a lost ack).
 */
export function createMailActivities(deps: MailDeps) {
  const transport = deps.smtpUrl ? nodemailer.createTransport(deps.smtpUrl as string) : undefined;
  return {
    async deliverMail(message: MailMessage, messageId: string): Promise<void> {
      if (transport) {
        await transport.sendMail({
          from: deps.from,
          to: message.to,
          subject: message.subject,
          text: message.text,
          messageId: `<${messageId}@flags>`,
        });
        return;
      }
      await deps.sql`
        INSERT INTO dev_mailbox (id, to_email, subject, body, token)
        VALUES (${messageId}, ${message.to}, ${message.subject}, ${message.text}, ${message.token ?? null})
        ON CONFLICT (id) DO NOTHING`;
    },
  };
}
