import type { Page } from 'playwright-core';
import type { TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * A flag per environment in the console: a flag created in all environments lands on a page that
 * says so; an environment that is on while serving only its default warns and offers the other
 * environment's rules, copied after a review (or as a change request when production needs
 * approval); "Saved" belongs to the tab it was saved in; the list shows every environment as a
 * column and remembers the environment chosen; a production toggle asks for confirmation with a
 * reason that reaches the audit log.
 */

// page.evaluate bodies run in the browser; the tests' tsconfig has no DOM lib.
declare const document: { activeElement: { getAttribute(name: string): string | null } | null };

let h: ConsoleHarness;
let page: Page;
let owner: TestUser;
let projectId: string;
let serviceId: string;

const TWENTY_PERCENT_RULE = { conditions: [{ property: 'country', operator: 'equals', value: 'FR' }], value: true, rolloutPercentage: 20 };

beforeAll(async () => {
  h = await startConsole();
  owner = await h.app.signup({ verified: true, name: 'Env Owner' });
  projectId = (await owner.request('POST', '/api/projects', { name: 'Env Shop' })).body.id;
  serviceId = (await owner.request('POST', '/api/services', { projectId, name: 'Checkout' })).body.id;
  page = await h.newPage();
  await h.signIn(page, owner.cookie);
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

const flagUrl = (key: string, environment: string) => `/api/flags/${key}?serviceId=${serviceId}&environment=${environment}`;
const flagInApi = async (key: string, environment: string) => (await owner.request('GET', flagUrl(key, environment))).body;
const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });
const tabs = () => page.getByRole('navigation', { name: 'Environments' });

async function eventually(check: () => Promise<boolean>, what: string) {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`never true: ${what}`);
}

describe('a flag in every environment', () => {
  it('lands on a page naming the environments, warns when production serves only the default, and copies the rules there', async () => {
    await page.goto(`/projects/${projectId}/flags/new`);
    await heading('Create a flag').waitFor();
    await page.getByLabel('Key').fill('pay-later');
    await page.getByRole('button', { name: 'Create flag' }).click();
    await page.getByRole('note').filter({ hasText: 'Created in development, staging and production' }).waitFor();
    await tabs().getByRole('link', { name: /development \(editing\)/ }).waitFor();
    await page.getByText(/Editing the rules of development/).waitFor();
    await screenshot(page, 'flag-environments-created-everywhere');

    // The rule is saved in development only, and production is switched on: it serves the default to everyone.
    const dev = await flagInApi('pay-later', 'development');
    expect((await owner.request('PATCH', flagUrl('pay-later', 'development'), { targeting: [TWENTY_PERCENT_RULE], version: dev.version })).status).toBe(200);
    expect((await owner.request('POST', `/api/flags/pay-later/toggle?serviceId=${serviceId}&environment=production`, { enabled: true })).status).toBe(200);

    await page.goto(`/projects/${projectId}/flags/pay-later?serviceId=${serviceId}&environment=production`);
    const warning = page.getByRole('alert').filter({ hasText: 'is on but serves the default value false to everyone' });
    await warning.waitFor();
    expect(await warning.textContent()).toContain('The rules are in development (1 rule)');
    await tabs().getByText('on · 0 rules').waitFor();
    await tabs().getByText('off · 1 rule · differs from production').waitFor();
    await screenshot(page, 'flag-environments-production-default-only-warning');

    await warning.getByRole('button', { name: "Copy development's rules to production…" }).click();
    const review = page.getByRole('region', { name: 'Copy rules from development to production' });
    await review.getByText('production gets 1 rule').waitFor();
    await review.getByText(/No recent contexts|contexts/).first().waitFor();
    await screenshot(page, 'flag-environments-copy-review');
    await review.getByRole('button', { name: 'Save rules in production' }).click();
    await warning.waitFor({ state: 'detached' });
    const production = await flagInApi('pay-later', 'production');
    expect(production.targeting).toEqual([{ ...TWENTY_PERCENT_RULE, id: expect.any(String) }]);
    expect(production.enabled).toBe(true);
    await tabs().getByText('off · 1 rule · same as production').waitFor();
  });

  it('shows "Saved" only on the tab it was saved in', async () => {
    await page.goto(`/projects/${projectId}/flags/pay-later?serviceId=${serviceId}&environment=development`);
    await page.getByLabel('Description').fill('Pay in 30 days');
    await page.getByRole('button', { name: 'Simulate and review changes' }).click();
    await page.getByRole('button', { name: 'Save changes' }).click();
    const saved = page.getByRole('status').filter({ hasText: /Saved: version \d+\. Applies to development only\./ });
    await saved.waitFor();
    await tabs().getByRole('link', { name: /production/ }).click();
    await page.getByText(/Editing the rules of production/).waitFor();
    await saved.waitFor({ state: 'detached' });
    expect(await page.getByText(/Saved.*version/).count()).toBe(0);
  });

  it('offers a change request when production needs approval for the copy', async () => {
    expect((await owner.request('POST', '/api/flags', { key: 'gift-wrap', serviceId, environment: 'development', targeting: [TWENTY_PERCENT_RULE] })).status).toBe(201);
    expect((await owner.request('POST', '/api/flags', { key: 'gift-wrap', serviceId, environment: 'production' })).status).toBe(201);
    const policy = await owner.request('PUT', `/api/projects/${projectId}/change-policy`, { environments: { production: { requiredApprovals: 1, approverRoles: ['owner', 'admin'] } } });
    expect(policy.status).toBe(200);
    await page.goto(`/projects/${projectId}/flags/gift-wrap?serviceId=${serviceId}&environment=development`);
    await page.getByRole('button', { name: 'Copy rules to production…' }).click();
    await page.getByRole('button', { name: 'Save rules in production' }).click();
    await page.getByRole('button', { name: 'Request approval for the copy' }).click();
    await page.getByRole('dialog', { name: 'Request approval' }).waitFor();
    await screenshot(page, 'flag-environments-copy-needs-approval');
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect((await flagInApi('gift-wrap', 'production')).targeting).toEqual([]);
    expect((await owner.request('PUT', `/api/projects/${projectId}/change-policy`, { environments: {} })).status).toBe(200);
  });
});

describe('environments in the flags list and the production switch', () => {
  it('shows every environment as a column linking to its flag page, and remembers the environment chosen', async () => {
    await page.goto(`/projects/${projectId}/flags`);
    await heading('Flags').waitFor();
    const row = page.getByRole('row').filter({ hasText: 'pay-later' });
    await row.getByRole('link', { name: 'production: on' }).waitFor();
    await row.getByRole('link', { name: 'staging: off' }).waitFor();
    await page.getByRole('row').filter({ hasText: 'gift-wrap' }).getByRole('link', { name: 'staging: not created' }).waitFor();
    await screenshot(page, 'flag-environments-list-columns');

    await page.getByLabel('Environment').selectOption('production');
    await row.getByRole('switch', { name: 'Enabled: pay-later' }).waitFor();
    await row.getByRole('link', { name: 'development: off' }).waitFor();
    // An address without an environment opens the one chosen last.
    await page.goto(`/projects/${projectId}/flags`);
    await row.getByRole('link', { name: 'development: off' }).waitFor();
    expect(await page.getByLabel('Environment').inputValue()).toBe('production');
    await page.goto(`/projects/${projectId}/flags/pay-later?serviceId=${serviceId}`);
    await page.getByText(/Editing the rules of production/).waitFor();
    await page.getByRole('switch', { name: 'Enabled in production' }).waitFor();
  });

  it('asks for confirmation with a reason before switching production, and the reason reaches the audit log', async () => {
    await page.goto(`/projects/${projectId}/flags/pay-later?serviceId=${serviceId}&environment=production`);
    const toggle = page.getByRole('switch', { name: 'Enabled in production' });
    await toggle.click();
    const dialog = page.getByRole('dialog', { name: /Turn pay-later off in production/ });
    await dialog.waitFor();
    // Cancel changes nothing.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect((await flagInApi('pay-later', 'production')).enabled).toBe(true);

    await toggle.click();
    await dialog.waitFor();
    // Focused on the reason: type and press Enter.
    expect(await page.evaluate(() => document.activeElement?.getAttribute('name'))).toBe('reason');
    await page.keyboard.type('Refund errors at checkout');
    await screenshot(page, 'flag-environments-production-toggle-confirmation');
    await page.keyboard.press('Enter');
    await eventually(async () => (await flagInApi('pay-later', 'production')).enabled === false, 'production disabled');
    expect(await toggle.getAttribute('aria-checked')).toBe('false');
    const audit = (await owner.request('GET', `/api/audit?projectId=${projectId}&action=flag.toggle`)).body.logs;
    expect(audit[0].metadata).toMatchObject({ environment: 'production', reason: 'Refund errors at checkout' });

    // Development switches at once, without a dialog.
    await tabs().getByRole('link', { name: /development/ }).click();
    await page.getByRole('switch', { name: 'Enabled in development' }).click();
    await eventually(async () => (await flagInApi('pay-later', 'development')).enabled === true, 'development enabled');
    expect(await page.getByRole('dialog').count()).toBe(0);
  });
});
