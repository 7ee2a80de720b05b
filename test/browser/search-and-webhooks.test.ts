import type { Page } from 'playwright-core';
import { eventually, type TestUser } from '../support/harness';
import { startReceiver, uniquePath, type Receiver } from '../webhooks/support';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * The on-call journey through the global flag search (from any page: "/", type, Enter lands on
 * the flag in production), and a webhook's test send and health (docs/api-reference.md#webhooks).
 */

let h: ConsoleHarness;
let page: Page;
let owner: TestUser;
let projectId: string;
let serviceId: string;
let receiver: Receiver;
const KEY = 'payments-kill-switch';

beforeAll(async () => {
  receiver = await startReceiver();
  h = await startConsole();
  owner = await h.app.signup({ verified: true, name: 'On-call Owner' });
  projectId = (await owner.request('POST', '/api/projects', { name: 'Search Shop' })).body.id;
  serviceId = (await owner.request('POST', '/api/services', { projectId, name: 'Payments' })).body.id;
  // No environment: the flag exists in all three, disabled; production is then switched on.
  expect((await owner.request('POST', '/api/flags', { key: KEY, serviceId, name: 'Payments kill switch', type: 'boolean', defaultValue: false })).status).toBe(201);
  expect((await owner.request('POST', `/api/flags/${KEY}/toggle?serviceId=${serviceId}&environment=production`, { enabled: true })).status).toBe(200);
  expect((await owner.request('POST', '/api/flags', { key: 'payments-banner', serviceId, name: 'Payments banner', type: 'boolean', environment: 'staging', defaultValue: false })).status).toBe(201);
  page = await h.newPage();
  await h.signIn(page, owner.cookie);
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  await receiver?.close();
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });
const combobox = () => page.getByRole('combobox', { name: 'Search flags in all projects' });
const option = (key: string) => page.getByRole('listbox', { name: 'Flags found' }).getByRole('option', { name: new RegExp(key) });

describe('global flag search', () => {
  it('opens with "/" from the projects page, lists the flag with a state chip per environment, and Enter opens production', async () => {
    await page.goto('/projects');
    await heading('Projects').waitFor();
    await page.keyboard.press('/');
    await combobox().waitFor();
    expect(await combobox().evaluate((input) => input === (input as unknown as { ownerDocument: { activeElement: unknown } }).ownerDocument.activeElement)).toBe(true);
    await page.keyboard.type('PAYMENTS-KILL');
    const found = option(KEY);
    await found.waitFor();
    await found.getByText('Search Shop / Payments').waitFor();
    for (const [environment, state] of [['development', 'Off'], ['staging', 'Off'], ['production', 'On']]) {
      await found.getByRole('link', { name: `${KEY} in ${environment}: ${state}`, exact: true }).waitFor();
    }
    expect(await found.getAttribute('aria-selected')).toBe('true');
    await screenshot(page, 'search-popup-flag-with-environment-chips');

    await page.keyboard.press('Enter');
    await page.waitForURL((url) => url.pathname === `/projects/${projectId}/flags/${KEY}` && url.searchParams.get('environment') === 'production' && url.searchParams.get('serviceId') === serviceId);
    expect(await combobox().count()).toBe(0);
  });

  it('opens with Ctrl+K on any page, moves with the arrows, closes with Escape, and a chip opens that environment', async () => {
    await page.goto(`/projects/${projectId}/settings/webhooks`);
    await heading('Webhooks').waitFor();
    // Typing "/" in a field stays typing.
    await page.getByLabel('Endpoint URL').fill('https://example.com');
    await page.getByLabel('Endpoint URL').press('/');
    expect(await combobox().count()).toBe(0);
    expect(await page.getByLabel('Endpoint URL').inputValue()).toBe('https://example.com/');
    await page.getByRole('heading', { name: 'Endpoints' }).click();

    await page.keyboard.press('Control+k');
    await combobox().fill('payments');
    await option('payments-banner').waitFor();
    await option(KEY).waitFor();
    // payments-banner (a key prefix, "b" before "k") first; the banner exists in staging only.
    expect(await option('payments-banner').getAttribute('aria-selected')).toBe('true');
    await page.keyboard.press('ArrowDown');
    expect(await option(KEY).getAttribute('aria-selected')).toBe('true');
    await page.keyboard.press('Escape');
    expect(await combobox().count()).toBe(0);

    await page.keyboard.press('Control+k');
    await combobox().fill('banner');
    await option('payments-banner').getByRole('link', { name: 'payments-banner in staging: Off' }).click();
    await page.waitForURL((url) => url.pathname === `/projects/${projectId}/flags/payments-banner` && url.searchParams.get('environment') === 'staging');
  });
});

describe('webhook test send and health', () => {
  async function openWebhook(path: string) {
    const created = (await owner.request('POST', '/api/webhooks', { projectId, url: receiver.url(path) })).body as { id: string; secret: string };
    receiver.expectSecret(path, created.secret);
    await page.goto(`/projects/${projectId}/settings/webhooks/${created.id}`);
    await page.getByRole('heading', { name: 'Delivery log' }).waitFor();
    return created;
  }

  it('sends a signed test event, shows the outcome and logs it', async () => {
    const path = uniquePath('console-ok');
    await openWebhook(path);
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.getByText(/^Test event delivered \(HTTP 200 in \d+ ms\)\.$/).waitFor({ timeout: 30_000 });
    const [received] = receiver.received(path);
    expect(received.body.event).toBe('webhook.test');
    expect(received.svcSignatureValid && received.standardSignatureValid).toBe(true);
    const row = page.getByRole('row', { name: /webhook\.test/ });
    await row.getByRole('cell', { name: 'delivered' }).waitFor();
    await page.getByText('Health: Healthy').first().waitFor();
    await screenshot(page, 'webhook-page-test-event-delivered');
  });

  it('shows a failing endpoint as failing on its page and on the list after a test send', async () => {
    const path = uniquePath('console-broken');
    receiver.behave(path, () => ({ status: 500 }));
    await openWebhook(path);
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.getByText(/^Test event failed in \d+ ms: HTTP 500/).waitFor({ timeout: 30_000 });
    await page.getByRole('row', { name: /webhook\.test/ }).getByRole('cell', { name: 'failed' }).waitFor();
    await page.getByText('Active · Health: Failing: the last delivery failed (HTTP 500)').waitFor();
    await screenshot(page, 'webhook-page-test-event-failed');

    await page.getByRole('link', { name: 'All webhooks' }).click();
    await heading('Webhooks').waitFor();
    const broken = page.getByRole('row', { name: new RegExp(path) });
    await eventually(async () => (await broken.getByRole('cell', { name: 'Failing: the last delivery failed (HTTP 500)' }).count()) === 1, 15_000, 200);
    await screenshot(page, 'webhooks-list-failing-health');
  });
});
