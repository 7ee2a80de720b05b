import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { MailMessage } from '../../../activities/mail';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { startWorkflow, type Temporal } from '../../infra/temporal';
import { SEND_MAIL } from '../../../workflows/messages';

const RETRY_MIN_MS = 1_000;
const RETRY_MAX_MS = 30_000;
/** Messages whose workflows one sweep starts; the next sweep takes the rest. */
const SWEEP_BATCH = 100;

/**
 * Stores a message in Postgres and hands its id to Temporal; once started, delivery (with
 * retries) no longer depends on us. Only the id enters the workflow history: mails carry
 * one-time tokens, and Temporal's history is readable by whoever operates Temporal.
 *
 * A stored message is accepted: when Temporal cannot take it (away, or the process stops between
 * the insert and the start), it waits in Postgres and its workflow is started later, after a
 * failed start with backoff and at every start of the process (docs/operations.md#faults-and-recovery).
 */
export class MailQueue {
  private retryTimer?: NodeJS.Timeout;
  private retryDelayMs = RETRY_MIN_MS;
  private stopped = false;

  constructor(private readonly deps: { temporal: Temporal; sql: Sql; logger: Logger }) {}

  async send(message: MailMessage, idempotencyKey: string): Promise<void> {
    const id = `mail-${idempotencyKey}`;
    // A second send with the same key finds the first message queued (or delivered): as before, the workflow id decides.
    await this.deps.sql`
      INSERT INTO outgoing_mail (id, to_email, subject, body, token)
      VALUES (${id}, ${message.to}, ${message.subject}, ${message.text}, ${message.token ?? null})
      ON CONFLICT (id) DO NOTHING`;
    try {
      await this.start(id);
    } catch (error) {
      this.deps.logger.warn({ err: error, mailId: id }, 'mail stored; its delivery starts once Temporal takes it');
      this.retryLater();
    }
  }

  /** Starts the workflow of every stored message that has none running; retries later while one fails. */
  async startStored(): Promise<void> {
    try {
      // Keyset pages by id: the messages of running workflows stay in the table until delivered.
      for (let after = ''; ; ) {
        const rows = await this.deps.sql<{ id: string }[]>`SELECT id FROM outgoing_mail WHERE id > ${after} ORDER BY id LIMIT ${SWEEP_BATCH}`;
        for (const { id } of rows) {
          if (this.stopped) return;
          await this.start(id);
        }
        if (rows.length < SWEEP_BATCH) break;
        after = rows[rows.length - 1].id;
      }
      this.retryDelayMs = RETRY_MIN_MS;
    } catch (error) {
      this.deps.logger.warn({ err: error }, 'starting stored mail failed; trying again');
      this.retryLater();
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
  }

  /** A message whose workflow runs (or ran) already is on its way. */
  private async start(id: string): Promise<void> {
    try {
      await startWorkflow(this.deps.temporal, SEND_MAIL, id, { workflowId: id });
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    }
  }

  private retryLater(): void {
    if (this.stopped || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.startStored();
    }, this.retryDelayMs);
    this.retryTimer.unref();
    this.retryDelayMs = Math.min(this.retryDelayMs * 2, RETRY_MAX_MS);
  }
}
