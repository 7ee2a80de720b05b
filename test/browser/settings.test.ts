import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { eventually } from '../support/harness';
import { mailLink, screenshot, startConsole, type ConsoleHarness } from './support';

let h: ConsoleHarness;
let page: Page;
/** A local endpoint for the webhook and the alert channel (the test profile allows 127.0.0.1 targets). */
let receiver: http.Server;
let receiverUrl: string;
const received: { url: string; body: string }[] = [];

let projectId: string;
/** A viewer of the project, signed in in a browser context of their own. */
let viewerCookie: string;
/** The owner's API access, for changes the UI under test only observes. */
let ownerRequest: (method: string, path: string, body?: unknown) => Promise<{ status: number }>;
let serviceId: string;
const invitee = `teammate-${Date.now()}@example.com`;

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push({ url: req.url ?? '', body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

  h = await startConsole();
  page = await h.newPage();
  // The owner is set up through the API and the browser takes over their session.
  const owner = await h.app.signup({ name: 'Settings Owner', verified: true });
  const project = await owner.request('POST', '/api/projects', { name: 'Settings Shop' });
  expect(project.status).toBe(201);
  projectId = project.body.id;
  ownerRequest = (method, path, body) => owner.request(method, path, body);
  const service = await owner.request('POST', '/api/services', { projectId, name: 'Storefront' });
  serviceId = service.body.id;
  const flag = await owner.request('POST', '/api/flags', { key: 'new-cart', name: 'New cart', type: 'boolean', serviceId, environment: 'production', defaultValue: false });
  expect(flag.status).toBe(201);
  const viewer = await h.app.signup({ name: 'Read Only', verified: true });
  expect((await owner.request('POST', `/api/projects/${projectId}/members`, { userId: viewer.id, role: 'viewer' })).status).toBe(201);
  viewerCookie = viewer.cookie;
  await h.signIn(page, owner.cookie);
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: h.base });
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  await new Promise((resolve) => receiver?.close(resolve));
  // No uncaught error and no Content-Security-Policy violation on any page the tests opened.
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });
const tab = (name: string) => page.getByRole('navigation', { name: 'Project settings' }).getByRole('link', { name, exact: true });
const clipboard = () => page.evaluate(() => (globalThis as any).navigator.clipboard.readText() as Promise<string>);

describe('project and account settings in the console', () => {
  it('creates a project API token whose secret is shown once, with a Copy button', async () => {
    await page.goto(`/projects/${projectId}/settings`);
    await heading('Settings of Settings Shop').waitFor();
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Settings' }).waitFor();
    await tab('API tokens').click();
    await heading('API tokens').waitFor();
    await page.getByLabel('Token name').fill('Checkout CI');
    await page.getByRole('checkbox', { name: /^Write/ }).check();
    await page.getByRole('button', { name: 'Create token' }).click();

    const dialog = page.getByRole('dialog', { name: 'Token "Checkout CI" created' });
    await dialog.getByText('it will not be shown again').waitFor();
    const secret = await dialog.getByLabel('Token', { exact: true }).inputValue();
    expect(secret).toMatch(/^fgr_[0-9a-f]{64}$/);
    await dialog.getByRole('button', { name: 'Copy' }).click();
    await dialog.getByRole('status').filter({ hasText: 'Copied token to the clipboard' }).waitFor();
    expect(await clipboard()).toBe(secret);
    await screenshot(page, 'settings-tokens');
    await dialog.getByRole('button', { name: 'I have copied it' }).click();
    await dialog.waitFor({ state: 'hidden' });

    const row = page.getByRole('row', { name: /Checkout CI/ });
    await row.getByRole('cell', { name: 'read, write' }).waitFor();
    // The native dialog hides at once; its content (the secret) goes on the close event's re-render.
    await page.getByText(secret).waitFor({ state: 'detached' });
    // After a reload the token is listed, its secret nowhere.
    await page.reload();
    await row.waitFor();
    expect(await page.content()).not.toContain(secret);

    // The token works until revoked; revoking asks once more in place (Cancel puts focus back).
    const flags = () => h.app.request('GET', `/api/flags?projectId=${projectId}`, { token: secret });
    expect((await flags()).status).toBe(200);
    const revoke = row.getByRole('button', { name: 'Revoke Checkout CI' });
    await revoke.click();
    await row.getByRole('button', { name: 'Cancel' }).click();
    expect(await revoke.evaluate((el) => el === (globalThis as any).document.activeElement)).toBe(true);
    await revoke.click();
    await row.getByRole('button', { name: 'Revoke now' }).click();
    await page.getByRole('status').filter({ hasText: 'Token "Checkout CI" was revoked' }).waitFor();
    await page.getByText('No API tokens yet.').waitFor();
    expect((await flags()).status).toBe(401);
  });

  it('invites a member and lists the pending invitation', async () => {
    await tab('Members').click();
    await heading('Members').waitFor();
    // The owner may change roles, their own included: a role picker per member.
    expect(await page.getByRole('combobox', { name: 'Role of Settings Owner' }).inputValue()).toBe('owner');
    await page.getByLabel('E-mail address').fill(invitee);
    await page.getByLabel('Role', { exact: true }).selectOption('viewer');
    await page.getByRole('button', { name: 'Send invitation' }).click();
    await page.getByRole('status').filter({ hasText: `Invitation sent to ${invitee}.` }).waitFor();
    const pending = page.getByRole('table', { name: 'Invitations not accepted yet' });
    await pending.getByRole('row', { name: new RegExp(invitee) }).getByRole('cell', { name: 'viewer' }).waitFor();
    await pending.getByRole('button', { name: `Resend invitation to ${invitee}` }).waitFor();
    await screenshot(page, 'settings-members');

    // On a phone the page does not widen: the tables scroll inside their own box.
    await page.setViewportSize({ width: 390, height: 800 });
    const overflow = await page.evaluate(() => {
      const root = (globalThis as any).document.documentElement as { scrollWidth: number; clientWidth: number };
      return root.scrollWidth - root.clientWidth;
    });
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(page, 'settings-members-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('adds a webhook (its generated secret shown once) and opens its empty delivery log', async () => {
    await tab('Webhooks').click();
    await heading('Webhooks').waitFor();
    await page.getByLabel('Endpoint URL').fill(`${receiverUrl}/flag-events`);
    // The flag events are checked as the API's default; change requests' steps are offered too.
    expect(await page.getByLabel('flag.toggled').isChecked()).toBe(true);
    expect(await page.getByLabel('change_request.approved').isChecked()).toBe(false);
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const dialog = page.getByRole('dialog', { name: 'Webhook created' });
    expect(await dialog.getByLabel('Signing secret').inputValue()).toMatch(/^whsec_/);
    await dialog.getByRole('button', { name: 'I have copied it' }).click();
    const row = page.getByRole('row', { name: new RegExp(`${receiverUrl}/flag-events`) });
    await row.getByRole('cell', { name: 'Active' }).waitFor();
    await row.getByRole('link', { name: `Deliveries and settings of ${receiverUrl}/flag-events` }).click();
    await heading('Webhook').waitFor();
    await page.getByRole('heading', { name: 'Delivery log' }).waitFor();
    await page.getByText(/^No deliveries yet: they appear/).waitFor();
    expect(await page.getByLabel('Endpoint URL').inputValue()).toBe(`${receiverUrl}/flag-events`);
    await screenshot(page, 'settings-webhooks');

    // A flag change is delivered to the receiver and shows in the log after a refresh.
    expect((await ownerRequest('POST', `/api/flags/new-cart/toggle?serviceId=${serviceId}&environment=production`, { enabled: true })).status).toBe(200);
    const delivered = page.getByRole('table', { name: 'Deliveries, newest first' }).getByRole('row', { name: /flag\.toggled/ });
    await eventually(async () => {
      await page.getByRole('button', { name: 'Refresh deliveries' }).click();
      return (await delivered.getByRole('cell', { name: 'delivered', exact: true }).count()) === 1;
    }, 15_000, 300);
    await delivered.getByRole('cell', { name: '200', exact: true }).waitFor();
    await screenshot(page, 'settings-webhook-deliveries');
    expect(received.some((r) => r.url === '/flag-events' && r.body.includes('new-cart'))).toBe(true);
  });

  it('creates a webhook alert channel and shows the answer to a test send', async () => {
    await tab('Alert channels').click();
    await heading('Alert channels').waitFor();
    await page.getByLabel('Channel name').fill('Ops receiver');
    await page.getByLabel('Type').selectOption('webhook');
    await page.getByLabel('URL', { exact: true }).fill(`${receiverUrl}/alerts`);
    await page.getByRole('button', { name: 'Add channel' }).click();
    const dialog = page.getByRole('dialog', { name: 'Channel "Ops receiver" created' });
    await dialog.getByRole('button', { name: 'I have copied it' }).click();
    const row = page.getByRole('row', { name: /Ops receiver/ });
    await row.getByRole('button', { name: 'Send test to Ops receiver' }).click();
    await row.getByRole('status').filter({ hasText: /^Test delivered: HTTP 200/ }).waitFor();
    expect(received.some((r) => r.url === '/alerts')).toBe(true);
    await screenshot(page, 'settings-alert-channels');
  });

  it('creates an e-mail alert channel whose recipient confirms through the mailed link', async () => {
    const recipient = `on-call-${Date.now()}@example.com`;
    await page.getByLabel('Channel name').fill('On-call mail');
    await page.getByLabel('Type').selectOption('email');
    await page.getByLabel('Recipients').fill(recipient);
    await page.getByRole('button', { name: 'Add channel' }).click();
    const row = page.getByRole('row', { name: /On-call mail/ });
    await row.getByText(`${recipient} (waiting for confirmation)`).waitFor();

    await page.goto(await mailLink(h.app, recipient, '/alert-channels/confirm'));
    await heading('Confirm alert e-mails').waitFor();
    await page.getByRole('button', { name: 'Confirm alert e-mails' }).click();
    await page.getByRole('status').filter({ hasText: `${recipient} will receive` }).waitFor();

    await page.goto(`/projects/${projectId}/settings/alert-channels`);
    await row.getByText(`${recipient} (confirmed)`).waitFor();
    await row.getByRole('button', { name: 'Send test to On-call mail' }).click();
    await row.getByRole('status').filter({ hasText: /^Test (queued for sending|delivered)/ }).waitFor();
  });

  it('creates a trigger for a flag and shows its URL once', async () => {
    await tab('Triggers').click();
    await heading('Triggers').waitFor();
    // The project's first service and its first flag are picked.
    await page.getByRole('heading', { name: 'Triggers of new-cart' }).waitFor();
    expect(await page.getByRole('combobox', { name: 'Flag' }).inputValue()).toBe('new-cart');
    await page.getByLabel('Trigger name').fill('On-call kill switch');
    await page.getByRole('button', { name: 'Create trigger' }).click();
    const dialog = page.getByRole('dialog', { name: 'Trigger "On-call kill switch" created' });
    expect(await dialog.getByLabel('Trigger URL').inputValue()).toMatch(/\/api\/triggers\/[^/]+$/);
    await dialog.getByRole('button', { name: 'I have copied it' }).click();
    const row = page.getByRole('table', { name: /^Active triggers of this flag/ }).getByRole('row', { name: /On-call kill switch/ });
    await row.getByRole('cell', { name: 'disable', exact: true }).waitFor();
    await row.getByRole('cell', { name: 'production' }).waitFor();
    // The service's overview lists it too, under its flag.
    await page.getByRole('table', { name: /^Active triggers of every flag/ }).getByRole('row', { name: /new-cart On-call kill switch/ }).waitFor();
  });

  it("hides what a viewer's role cannot do and says why; the owner changes their role and removes them", async () => {
    const viewerPage = await h.newPage();
    await h.signIn(viewerPage, viewerCookie);
    await viewerPage.goto(`/projects/${projectId}/settings/tokens`);
    await viewerPage.getByText('Managing API tokens and webhooks needs the owner or admin role in this project.').waitFor();
    expect(await viewerPage.getByRole('button', { name: 'Create token' }).count()).toBe(0);
    await viewerPage.getByRole('navigation', { name: 'Project settings' }).getByRole('link', { name: 'Members', exact: true }).click();
    await viewerPage.getByText(/Managing members needs the owner or admin role/).waitFor();
    await viewerPage.getByRole('button', { name: 'Leave project' }).waitFor();
    expect(await viewerPage.getByRole('button', { name: 'Send invitation' }).count()).toBe(0);
    expect(await viewerPage.getByRole('combobox', { name: /^Role of/ }).count()).toBe(0);
    await viewerPage.close();

    // The owner promotes them, then removes them.
    await tab('Members').click();
    const row = page.getByRole('row', { name: /Read Only/ });
    await row.getByRole('combobox', { name: 'Role of Read Only' }).selectOption('admin');
    await row.getByRole('button', { name: 'Save role of Read Only' }).click();
    await page.getByRole('status').filter({ hasText: 'Read Only is now admin.' }).waitFor();
    await row.getByRole('button', { name: 'Remove Read Only' }).click();
    await row.getByRole('button', { name: 'Remove', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Read Only was removed from the project.' }).waitFor();
    await row.waitFor({ state: 'detached' });
  });

  it('creates a personal token under Account, shown once', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Account' }).click();
    await heading('Personal tokens').waitFor();
    await page.getByLabel('Token name').fill('Laptop CLI');
    await page.getByRole('radio', { name: /^Write/ }).check();
    await page.getByRole('button', { name: 'Create personal token' }).click();
    const dialog = page.getByRole('dialog', { name: 'Personal token "Laptop CLI" created' });
    const secret = await dialog.getByLabel('Token', { exact: true }).inputValue();
    expect(secret).toMatch(/^fgp_[0-9a-f]{64}$/);
    await dialog.getByRole('button', { name: 'I have copied it' }).click();
    await page.getByRole('row', { name: /Laptop CLI/ }).getByRole('cell', { name: `…${secret.slice(-4)}` }).waitFor();
    await screenshot(page, 'settings-personal-tokens');
    await page.getByRole('navigation', { name: 'Account' }).getByRole('link', { name: 'MCP connections' }).click();
    await page.getByText('No MCP client is connected to your account.').waitFor();
  });
});
