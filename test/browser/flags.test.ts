import type { Page } from 'playwright-core';
import type { TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * The flags area of the console: create a flag, find it in the list with
 * the filters, toggle it with the keyboard alone, and edit its targeting on the detail page
 * (a condition and a 30% rollout), simulated over recent real contexts before it is saved.
 * The user, project, service, a second flag and the evaluations come from the API.
 */

// page.evaluate bodies run in the browser; the tests' tsconfig has no DOM lib.
declare const document: {
  activeElement: { getAttribute(name: string): string | null } | null;
  documentElement: { scrollWidth: number; clientWidth: number };
};

let h: ConsoleHarness;
let page: Page;
let owner: TestUser;
let projectId: string;
let serviceId: string;
let readToken: string;
let cohortId: string;

beforeAll(async () => {
  h = await startConsole();
  owner = await h.app.signup({ verified: true, name: 'Flag Owner' });
  projectId = (await owner.request('POST', '/api/projects', { name: 'Flag Shop' })).body.id;
  serviceId = (await owner.request('POST', '/api/services', { projectId, name: 'Storefront' })).body.id;
  const other = await owner.request('POST', '/api/flags', { key: 'legacy-banner', serviceId, name: 'Legacy banner', type: 'string', defaultValue: 'old', tags: ['ops'] });
  expect(other.status).toBe(201);
  cohortId = (await owner.request('POST', `/api/projects/${projectId}/cohorts`, { name: 'Americans', rules: [{ conditions: [{ property: 'country', operator: 'equals', value: 'US' }] }] })).body.id;
  readToken = (await owner.request('POST', `/api/projects/${projectId}/tokens`, { name: 'evaluate', permissions: { read: true } })).body.value;
  page = await h.newPage();
  await h.signIn(page, owner.cookie);
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  // No uncaught error and no Content-Security-Policy violation on any page the tests opened.
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });
const flagSwitch = () => page.getByRole('switch', { name: 'Enabled: new-checkout' });
const flagInApi = async (environment = 'development') =>
  (await owner.request('GET', `/api/flags/new-checkout?serviceId=${serviceId}&environment=${environment}`)).body;

describe('flags in the console', () => {
  it('creates a flag, showing the API field error inline first', async () => {
    await page.goto(`/projects/${projectId}/flags`);
    await heading('Flags').waitFor();
    await page.getByRole('link', { name: 'Create flag' }).click();
    await heading('Create a flag').waitFor();
    await page.getByLabel('Key').fill('bad key!');
    await page.getByRole('button', { name: 'Create flag' }).click();
    await page.getByText('must start with a letter or digit', { exact: false }).waitFor();
    expect(await page.getByLabel('Key').getAttribute('aria-invalid')).toBe('true');
    await page.getByLabel('Key').fill('new-checkout');
    await page.getByLabel('Name', { exact: true }).fill('New checkout');
    await page.getByLabel('Tags').fill('checkout, beta');
    await page.getByRole('button', { name: 'Create flag' }).click();
    await heading(/New checkout/).waitFor();
    // Created in every environment: each tab is a record of its own.
    for (const env of ['development', 'staging', 'production']) expect((await flagInApi(env)).key).toBe('new-checkout');
  });

  it('lists, searches and filters flags', async () => {
    await page.getByRole('link', { name: 'All flags' }).click();
    await heading('Flags').waitFor();
    await page.getByRole('link', { name: 'legacy-banner' }).waitFor();
    await page.getByRole('link', { name: 'new-checkout' }).waitFor();
    await screenshot(page, 'flags-list');

    await page.getByLabel('Search').fill('checkout');
    await page.getByRole('link', { name: 'legacy-banner' }).waitFor({ state: 'detached' });
    await page.getByRole('link', { name: 'new-checkout' }).waitFor();
    await page.getByLabel('Search').fill('');
    await page.getByLabel('Type').selectOption('string');
    await page.getByRole('link', { name: 'new-checkout' }).waitFor({ state: 'detached' });
    await page.getByRole('link', { name: 'legacy-banner' }).waitFor();
    await page.getByLabel('Type').selectOption('');
    await page.getByRole('button', { name: 'Filter by tag beta' }).click();
    await page.getByRole('link', { name: 'legacy-banner' }).waitFor({ state: 'detached' });
    expect(new URL(page.url()).searchParams.get('tags')).toBe('beta');
    await page.getByLabel('State').selectOption('false');
    await page.getByRole('link', { name: 'new-checkout' }).waitFor();
  });

  it('toggles a flag with the keyboard alone, and the state persists', async () => {
    await page.getByLabel('Search').focus();
    // Tab from the search box through the filters and the row to the flag's switch.
    for (let i = 0; i < 20; i++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))) === 'Enabled: new-checkout') break;
    }
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).toBe('Enabled: new-checkout');
    expect(await flagSwitch().getAttribute('aria-checked')).toBe('false');
    const toggled = page.waitForResponse((res) => res.url().includes('/api/flags/new-checkout/toggle'));
    await page.keyboard.press('Space');
    // Optimistic: on at once, before the answer.
    expect(await flagSwitch().getAttribute('aria-checked')).toBe('true');
    expect((await toggled).status()).toBe(200);
    expect((await flagInApi()).enabled).toBe(true);
    await page.getByLabel('State').selectOption('');
    await page.reload();
    await flagSwitch().waitFor();
    expect(await flagSwitch().getAttribute('aria-checked')).toBe('true');

    // A refused toggle flips back and says why.
    await page.route('**/api/flags/new-checkout/toggle**', (route) =>
      route.fulfill({ status: 403, contentType: 'application/json', body: JSON.stringify({ error: 'Forbidden', message: 'Your role may not change flags' }) }),
    );
    await flagSwitch().press('Space');
    await page.getByRole('alert').filter({ hasText: 'Not disabled: Your role may not change flags' }).waitFor();
    expect(await flagSwitch().getAttribute('aria-checked')).toBe('true');
    await page.unroute('**/api/flags/new-checkout/toggle**');
  });

  it('adds a rule with a condition and a 30% rollout, simulates it over recent contexts, and saves it', async () => {
    // Recent real contexts of the service: evaluations with a project token feed the context ring.
    for (let i = 0; i < 40; i++) {
      const res = await h.app.request('POST', '/api/flags/evaluate', {
        token: readToken,
        body: { flagKey: 'new-checkout', serviceId, environment: 'development', context: { targetingKey: `user-${i}`, country: i % 2 ? 'FR' : 'US' } },
      });
      expect(res.status).toBe(200);
    }
    await page.getByRole('link', { name: 'new-checkout' }).click();
    await heading(/New checkout/).waitFor();
    await page.getByRole('navigation', { name: 'Environments' }).getByRole('link', { name: /staging/ }).waitFor();
    for (const name of ['History and audit', 'Explain a context', 'Metrics']) {
      const link = page.getByRole('navigation', { name: 'More about this flag' }).getByRole('link', { name });
      expect(await link.getAttribute('href')).toMatch(new RegExp(`/flags/new-checkout/\\w+\\?serviceId=${serviceId}&environment=development$`));
    }
    await page.getByRole('button', { name: 'Watch this flag' }).click();
    await page.getByRole('button', { name: 'Watch this flag', pressed: true }).waitFor();

    // Variant weights are checked as typed, and a candidate with a wrong sum is not sent.
    await page.getByRole('button', { name: 'Add variant' }).click();
    await page.getByRole('button', { name: 'Add variant' }).click();
    await page.getByLabel('Variant 2 weight (%)').fill('30');
    await page.getByText('Weights sum to 130; they must sum to 100.').waitFor();
    await page.getByRole('button', { name: 'Simulate and review changes' }).click();
    await page.getByText('Variant weights must sum to 100; they sum to 130.').waitFor();
    await page.getByRole('button', { name: 'Remove variant 2' }).click();
    await page.getByRole('button', { name: 'Remove variant 1' }).click();

    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByLabel('Rule 1, condition 1 attribute').fill('country');
    await page.getByLabel('Rule 1, condition 1 operator').selectOption('equals');
    await page.getByLabel('Rule 1, condition 1 value', { exact: true }).fill('FR');
    await page.getByLabel('Rule 1 serves').selectOption('true');
    await page.getByLabel('Rule 1 rollout percentage').fill('30');
    await page.getByText('30%', { exact: true }).waitFor();
    // A second rule on a cohort of the project, moved first.
    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByLabel('Rule 2, condition 1 operator').selectOption('in_cohort');
    await page.getByLabel('Rule 2, condition 1 value', { exact: true }).selectOption({ label: 'Americans' });
    await page.getByLabel('Rule 2 serves').selectOption('false');
    await page.getByRole('button', { name: 'Move rule 2 up' }).click();
    expect(await page.getByLabel('Rule 1, condition 1 operator').inputValue()).toBe('in_cohort');
    await screenshot(page, 'flag-detail');

    const simulated = page.waitForResponse((res) => res.url().endsWith('/api/flags/new-checkout/simulate'));
    await page.getByRole('button', { name: 'Simulate and review changes' }).click();
    expect((await simulated).status()).toBe(200);
    await page.getByRole('heading', { name: 'Review before saving' }).waitFor();
    await page.getByText(/of 40 recent contexts would get a different value/).waitFor();
    await screenshot(page, 'flag-simulate');

    const saved = page.waitForResponse((res) => res.request().method() === 'PATCH');
    await page.getByRole('button', { name: 'Save changes' }).click();
    const patch = await saved;
    expect(patch.status()).toBe(200);
    // Only the changed field (and the version it was based on) went to the server.
    expect(Object.keys(JSON.parse(patch.request().postData() ?? '{}')).sort()).toEqual(['targeting', 'version']);
    await page.getByRole('heading', { name: 'Review before saving' }).waitFor({ state: 'detached' });

    const flag = await flagInApi();
    expect(flag.targeting).toEqual([
      { id: expect.any(String), conditions: [{ property: 'targetingKey', operator: 'in_cohort', value: cohortId }], value: false },
      { id: expect.any(String), conditions: [{ property: 'country', operator: 'equals', value: 'FR' }], value: true, rolloutPercentage: 30 },
    ]);
    await page.getByRole('status').filter({ hasText: 'Saved: version 3.' }).waitFor();

    // The narrow layout: the editor stacks, nothing scrolls sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByLabel('Rule 2, condition 1 attribute').waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);
    await screenshot(page, 'flag-detail-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
    expect((await owner.request('GET', `/api/flags/new-checkout/watch?serviceId=${serviceId}&environment=development`)).body.watching).toBe(true);
  });
});

describe('a flag in one environment only', () => {
  it('creates it in another environment as a disabled copy, and says when a simulation has no recent contexts', async () => {
    const created = await owner.request('POST', '/api/flags', { key: 'dev-only', serviceId, environment: 'development', name: 'Dev only', enabled: true, tags: ['lab'] });
    expect(created.status).toBe(201);
    await page.goto(`/projects/${projectId}/flags/dev-only?serviceId=${serviceId}&environment=staging`);
    await page.getByRole('heading', { name: 'Not created in staging' }).waitFor();
    expect(await page.getByLabel('Copy from').inputValue()).toBe('development');
    await page.getByRole('button', { name: 'Create in staging' }).click();
    await page.getByRole('switch', { name: 'Enabled in staging' }).waitFor();
    expect(await page.getByRole('switch', { name: 'Enabled in staging' }).getAttribute('aria-checked')).toBe('false');
    const copy = (await owner.request('GET', `/api/flags/dev-only?serviceId=${serviceId}&environment=staging`)).body;
    expect(copy).toMatchObject({ name: 'Dev only', tags: ['lab'], enabled: false });

    // Nothing has evaluated anything in staging: the review says so instead of showing zeros.
    await page.getByLabel('Default value (boolean)').selectOption('true');
    await page.getByRole('button', { name: 'Simulate and review changes' }).click();
    await page.getByText(/No recent contexts for this service and environment/).waitFor();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('heading', { name: 'Review before saving' }).waitFor({ state: 'detached' });
  });
});

describe('in-process compatibility on the flag page', () => {
  it('shows the badge, and the reasons when in-process providers cannot evaluate the flag', async () => {
    const targeting = [{ id: 'corp', conditions: [{ property: 'email', operator: 'matches', value: '@corp\\.example$' }], value: true }];
    expect((await owner.request('POST', '/api/flags', { key: 'corp-only', serviceId, environment: 'development', targeting })).status).toBe(201);
    await page.goto(`/projects/${projectId}/flags/corp-only?serviceId=${serviceId}&environment=development`);
    await page.getByText('In-process: not compatible').waitFor();
    const reasons = page.getByRole('list', { name: 'Why in-process providers cannot evaluate this flag' });
    await reasons.getByText('Rule corp (matches): flagd has no regular-expression operator').waitFor();
    await screenshot(page, 'flag-in-process-not-compatible');

    await page.goto(`/projects/${projectId}/flags/legacy-banner?serviceId=${serviceId}&environment=development`);
    await page.getByText('In-process: compatible').waitFor();
    expect(await page.getByText('In-process: not compatible').count()).toBe(0);
  });
});
