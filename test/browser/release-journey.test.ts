import type { Page } from 'playwright-core';
import { eventually, type TestResponse } from '../support/harness';
import { mailLink, screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * The console's end-to-end journey in one browser flow: sign up and verify the
 * address through the mailed link, create a project, a service and a flag, turn it on and add a
 * rule in the editor, evaluate it through the data plane, see the evaluations on the flag's
 * metrics page, roll back to version 1 from its history. Then the admin funnel counts what the
 * console reported of all that (screen_viewed -> flag_viewed -> activation). Only the
 * evaluations (an SDK's part) and the checks go through the API.
 */

let h: ConsoleHarness;
let page: Page;
const email = `release-journey-${Date.now()}@example.com`;
const password = 'correct horse battery staple';
const flagKey = 'one-click-checkout';
const EVALUATIONS = 30;
let projectId: string;
let serviceId: string;

beforeAll(async () => {
  // Short flushes (as test/browser/metrics.test.ts): evaluations and admin events reach the warehouse within a second.
  h = await startConsole({ EVAL_EVENTS_FLUSH_MS: '300', ANALYTICS_FLUSH_MS: '300' });
  page = await h.newPage();
}, 60_000);
afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  // No uncaught error and no Content-Security-Policy violation on any page of the journey.
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });

/** The API as the user signed in to the browser: its session cookie and a CSRF token. */
async function asUser(method: string, path: string, body?: unknown): Promise<TestResponse> {
  const cookie = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
  const csrf = method === 'GET' ? undefined : ((await h.app.request('GET', '/api/csrf-token', { cookie })).body.token as string);
  return h.app.request(method, path, { cookie, csrf, body });
}
const flagInApi = async () => (await asUser('GET', `/api/flags/${flagKey}?serviceId=${serviceId}&environment=production`)).body;

describe('the release journey', () => {
  it('signs up and verifies the address through the mailed link', async () => {
    await page.goto('/signup');
    await heading('Create an account').waitFor();
    await page.getByLabel('Name').fill('Release Engineer');
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await heading(/^Projects/).waitFor();
    await page.goto(await mailLink(h.app, email, '/verify-email'));
    await page.getByText('Your e-mail address is verified').waitFor();
    await page.getByRole('link', { name: 'Continue to the console' }).click();
    await heading(/^Projects/).waitFor();
  });

  it('creates a project, a service and a flag in production', async () => {
    await page.getByLabel('Project name').fill('Release Shop');
    await page.getByRole('button', { name: 'Create project' }).click();
    await heading('Release Shop').waitFor();
    projectId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2]);
    await page.getByLabel('Service name').fill('Checkout API');
    await page.getByRole('button', { name: 'Create service' }).click();
    await page.getByRole('cell', { name: 'Checkout API', exact: true }).waitFor();

    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Flags' }).click();
    await heading('Flags').waitFor();
    await page.getByRole('link', { name: 'Create flag' }).click();
    await heading('Create a flag').waitFor();
    await page.getByLabel('Environment').selectOption('production');
    await page.getByLabel('Key').fill(flagKey);
    await page.getByLabel('Name', { exact: true }).fill('One-click checkout');
    await page.getByRole('button', { name: 'Create flag' }).click();
    await heading(/One-click checkout/).waitFor();
    const address = new URL(page.url());
    serviceId = address.searchParams.get('serviceId')!;
    expect(address.searchParams.get('environment')).toBe('production');
    // The shell's title names the flag (the page refines the route's title).
    expect(await page.title()).toBe(`${flagKey} · Flag · Flagship`);
  });

  it('turns the flag on and adds a rule in the editor', async () => {
    const flagSwitch = page.getByRole('switch', { name: 'Enabled in production' });
    await flagSwitch.click();
    // Production asks first, with an optional reason.
    await page.getByRole('dialog', { name: new RegExp(`Turn ${flagKey} on in production`) }).getByRole('button', { name: /Turn on/ }).click();
    await page.getByRole('switch', { name: 'Enabled in production', checked: true }).waitFor();
    await eventually(async () => (await flagInApi()).enabled === true);

    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByLabel('Rule 1, condition 1 attribute').fill('country');
    await page.getByLabel('Rule 1, condition 1 operator').selectOption('equals');
    await page.getByLabel('Rule 1, condition 1 value', { exact: true }).fill('FR');
    await page.getByLabel('Rule 1 serves').selectOption('true');
    await page.getByRole('button', { name: 'Simulate and review changes' }).click();
    await page.getByRole('heading', { name: 'Review before saving' }).waitFor();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved: version 3.' }).waitFor();
    await screenshot(page, 'journey-flag-rule');
    expect((await flagInApi()).targeting).toEqual([{ id: expect.any(String), conditions: [{ property: 'country', operator: 'equals', value: 'FR' }], value: true }]);
  });

  it('evaluates the flag through the data plane and sees the evaluations on its metrics page', async () => {
    const token = await asUser('POST', `/api/projects/${projectId}/tokens`, { name: 'sdk', permissions: { read: true } });
    expect(token.status).toBe(201);
    const evaluations = await Promise.all(
      Array.from({ length: EVALUATIONS }, (_, i) =>
        h.app.request('POST', '/api/flags/evaluate', {
          listener: 'data',
          token: token.body.value as string,
          body: { flagKey, serviceId, environment: 'production', context: { targetingKey: `user-${i}`, country: i % 3 ? 'DE' : 'FR' } },
        }),
      ),
    );
    expect(evaluations.map((res) => res.status)).toEqual(Array(EVALUATIONS).fill(200));
    // The rule serves true to the French users only: a third of them.
    expect(evaluations.filter((res) => res.body.value === true)).toHaveLength(EVALUATIONS / 3);
    await eventually(async () => {
      const metrics = await asUser('GET', `/api/flags/${flagKey}/metrics?serviceId=${serviceId}&environment=production&range=1h`);
      return metrics.body?.summary?.totalEvaluations === EVALUATIONS;
    }, 20_000);

    await page.getByRole('navigation', { name: 'More about this flag' }).getByRole('link', { name: 'Metrics' }).click();
    await heading(`Metrics of ${flagKey}`).waitFor();
    expect(await page.title()).toBe(`Metrics of ${flagKey} · Flagship`);
    const summary = page.getByRole('region', { name: 'Summary' });
    await summary.getByRole('definition').first().waitFor();
    expect(await summary.getByRole('term').first().textContent()).toBe('Evaluations');
    expect(await summary.getByRole('definition').first().textContent()).toBe(String(EVALUATIONS));
    await screenshot(page, 'journey-flag-metrics');
  });

  it('rolls back to version 1 from the history, and the rule is gone', async () => {
    await page.getByRole('link', { name: 'Open the flag' }).click();
    await heading(/One-click checkout/).waitFor();
    await page.getByRole('navigation', { name: 'More about this flag' }).getByRole('link', { name: 'History and audit' }).click();
    await heading(`History of ${flagKey}`).waitFor();
    expect(await page.title()).toBe(`History of ${flagKey} · Flagship`);
    const first = page.getByRole('listitem', { name: /^Version 1\b/ });
    await first.getByRole('button', { name: 'Roll back to version 1' }).click();
    await page.getByRole('button', { name: 'Confirm rollback to version 1' }).click();
    await page.getByRole('status').filter({ hasText: 'Rolled back to version 1: the flag is now at version 4' }).waitFor();
    await screenshot(page, 'journey-rollback');
    // Version 1's content: no rule, and off as it was created.
    expect(await flagInApi()).toMatchObject({ version: 4, targeting: [], enabled: false });
  });

  it("counts the console's own usage in the admin funnel", async () => {
    // The console posts its events in batches at most 5 s apart. A project member reads its funnel: screen_viewed -> flag_viewed -> activation, one user through all.
    const funnel = await eventually(async () => {
      const res = await asUser('GET', `/api/analytics/admin-funnel?projectId=${projectId}&range=24h`);
      expect(res.status).toBe(200);
      const steps = res.body.funnel.steps as { event: string; users: number }[];
      return steps.every((s) => s.users === 1) ? steps : undefined;
    }, 20_000);
    expect(funnel.map((s) => s.event)).toEqual(['screen_viewed', 'flag_viewed', 'activation']);
  });
});
