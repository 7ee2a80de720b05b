import { MailQueue } from '../../api/lib/mail/mail-queue';
import { eventually, startTestApp, type TestApp } from '../support/harness';

// Mail is accepted once stored (docs/operations.md#faults-and-recovery): a message whose
// workflow never started (Temporal away, or the process stopped between storing and starting)
// is started by the next sweep.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.stop());

const mailbox = async (to: string) => (await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(to)}`)).body.messages as { token: string }[] | undefined;

it('starts the delivery of stored messages that have no workflow, once each', async () => {
  const { sql } = app.platform.db;
  const to = `stored-${Date.now()}@example.com`;
  // As a crash right after the insert leaves it: stored, no workflow.
  await sql`INSERT INTO outgoing_mail (id, to_email, subject, body, token) VALUES (${`mail-test-${to}`}, ${to}, 'Stored', 'body', 'tok-stored')`;
  const queue = new MailQueue({ temporal: app.platform.temporal, sql, logger: app.platform.logger });
  try {
    await queue.startStored();
    await eventually(async () => (await mailbox(to))?.length === 1, 30_000);
    // A second sweep finds nothing left to start.
    await queue.startStored();
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await mailbox(to))?.map((m) => m.token)).toEqual(['tok-stored']);
    expect(await sql`SELECT id FROM outgoing_mail WHERE to_email = ${to}`).toEqual([]);
  } finally {
    queue.stop();
  }
});
