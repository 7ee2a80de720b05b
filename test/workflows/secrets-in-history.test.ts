import { createHash } from 'node:crypto';
import { eventually, startTestApp, type TestApp } from '../support/harness';

/**
 * Anyone who can read Temporal (its UI, its database, an exported history)
 * must not find a live invitation or verification token there. Workflows carry ids; the
 * activity reads the message from Postgres.
 */
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.stop());

/** Every string and every payload (decoded as UTF-8) of a workflow's history, concatenated. */
async function historyText(workflowId: string): Promise<string> {
  const history = await app.platform.temporal.client.workflow.getHandle(workflowId).fetchHistory();
  const parts: string[] = [];
  const walk = (value: unknown): void => {
    if (value instanceof Uint8Array) parts.push(Buffer.from(value).toString('utf8'));
    else if (typeof value === 'string') parts.push(value);
    else if (Array.isArray(value)) value.forEach(walk);
    else if (value !== null && typeof value === 'object') Object.values(value).forEach(walk);
  };
  walk(history);
  return parts.join('\n');
}

async function mailedToken(to: string, subject: RegExp): Promise<string> {
  return eventually(async () => {
    const res = await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(to)}`);
    return res.body.messages.find((m: { subject: string }) => subject.test(m.subject))?.token as string | undefined;
  });
}

/** Waits until the workflow completed, so its whole history (activity input included) is there. */
async function completedHistory(workflowId: string): Promise<string> {
  await app.platform.temporal.client.workflow.getHandle(workflowId).result();
  return historyText(workflowId);
}

it('a verification mail workflow carries no token', async () => {
  const user = await app.signup();
  const token = await mailedToken(user.email, /verify/i);
  const workflowId = `mail-verify-${createHash('sha256').update(token).digest('hex').slice(0, 32)}`;
  const text = await completedHistory(workflowId);
  expect(text).toContain(workflowId);
  expect(text).not.toContain(token);
  expect(text).not.toContain(user.email);
});

it('invitation mail and expiry workflows carry no token', async () => {
  const owner = await app.signup();
  const project = await owner.request('POST', '/api/projects', { name: 'Secrets' });
  const email = `invitee-${Date.now()}@example.com`;
  const invitation = await owner.request('POST', `/api/projects/${project.body.id}/invitations`, { email, role: 'viewer' });
  expect(invitation.status).toBe(201);
  const token = await mailedToken(email, /invited/i);

  const mail = await completedHistory(`mail-invitation-${invitation.body.id}`);
  expect(mail).not.toContain(token);
  expect(mail).not.toContain(email);

  // The expiry timer runs for 7 days: its history so far holds its input.
  const expiry = await historyText(`invitation-expiry-${invitation.body.id}`);
  expect(expiry).toContain(invitation.body.id);
  expect(expiry).not.toContain(token);

  // The queued copy of a message (the secret with it) is gone once delivered.
  expect(await app.platform.db.sql`SELECT id FROM outgoing_mail`).toEqual([]);
});
