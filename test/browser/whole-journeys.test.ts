import type { Page } from 'playwright-core';
import { mailLink, screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * Two whole journeys through the console, each measured from outside it:
 * - a new user, from signing up to a rule serving 20% in production, checked by evaluating 1,000
 *   contexts over OFREP with the token and base URL the "Connect an SDK" page gave;
 * - an SRE at 3 a.m., from the landing page to a production flag killed with a reason, in at most
 *   four interactions (a shortcut, a search ending in Enter, a click, a reason ending in Enter).
 */

let h: ConsoleHarness;
let page: Page;

beforeAll(async () => {
  // 1,000 evaluations from 127.0.0.1 on top of the console's own requests.
  h = await startConsole({ RATE_LIMIT_PER_IP: '100000' });
  page = await h.newPage();
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });
const email = `new-user-${Date.now()}@example.com`;
let serviceId: string;

describe("a new user's first rule, from sign-up to 20% of production", () => {
  it('signs up, verifies the address, and creates a project and a service', async () => {
    await page.goto('/');
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByLabel('Name').fill('New User');
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill('correct horse battery staple');
    await page.getByRole('button', { name: 'Create account' }).click();
    await heading(/^Projects/).waitFor();
    await page.goto(await mailLink(h.app, email, '/verify-email'));
    await page.getByRole('link', { name: 'Continue to the console' }).click();
    await page.getByLabel('Project name').fill('Shop');
    await page.getByRole('button', { name: 'Create project' }).click();
    await heading('Shop').waitFor();
    await page.getByLabel('Service name').fill('Checkout');
    await page.getByRole('button', { name: 'Create service' }).click();
    await page.getByRole('cell', { name: 'Checkout', exact: true }).waitFor();
  }, 60_000);

  it('creates a flag in every environment and writes a 20% rule where the editor opens', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Flags' }).click();
    await page.getByRole('link', { name: 'Create flag' }).click();
    await heading('Create a flag').waitFor();
    await page.getByLabel('Key').fill('new-checkout');
    await page.getByRole('button', { name: 'Create flag' }).click();
    await page.getByRole('note').filter({ hasText: 'Created in development, staging and production' }).waitFor();
    serviceId = new URL(page.url()).searchParams.get('serviceId')!;

    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByLabel('Rule 1, condition 1 attribute').fill('plan');
    await page.getByLabel('Rule 1, condition 1 operator').selectOption('equals');
    await page.getByLabel('Rule 1, condition 1 value', { exact: true }).fill('pro');
    await page.getByLabel('Rule 1 serves').selectOption('true');
    await page.getByLabel('Rule 1 rollout percentage').fill('20');
    await page.getByRole('button', { name: 'Simulate and review changes' }).click();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: /Saved: version \d+\. Applies to development only\./ }).waitFor();
  }, 60_000);

  it('switches production on, is told it serves only the default, and copies the rule there', async () => {
    await page.getByRole('navigation', { name: 'Environments' }).getByRole('link', { name: /production/ }).click();
    await page.getByText(/Editing the rules of production/).waitFor();
    await page.getByRole('switch', { name: 'Enabled in production' }).click();
    const confirm = page.getByRole('dialog', { name: /Turn new-checkout on in production/ });
    await confirm.getByRole('button', { name: /Turn on/ }).click();
    await confirm.waitFor({ state: 'hidden' });
    const warning = page.getByRole('alert').filter({ hasText: 'is on but serves the default value false to everyone' });
    await warning.waitFor();
    await warning.getByRole('button', { name: "Copy development's rules to production…" }).click();
    await page.getByRole('region', { name: 'Copy rules from development to production' }).getByRole('button', { name: 'Save rules in production' }).click();
    await warning.waitFor({ state: 'detached' });
    await screenshot(page, 'journey-new-user-rule-in-production');
  }, 60_000);

  it('connects an SDK with a production token, and about 20% of 1,000 contexts get true', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Overview' }).click();
    await page.getByRole('link', { name: 'Connect an SDK to Checkout' }).click();
    await page.getByLabel('Environment', { exact: true }).selectOption('production');
    await page.getByRole('button', { name: 'Create token' }).click();
    const dialog = page.getByRole('dialog');
    const token = await dialog.getByLabel('Token', { exact: true }).inputValue();
    await dialog.getByRole('button', { name: 'I have copied it' }).click();
    const snippet = page.locator('pre[data-snippet="ofrep-node"]');
    await snippet.filter({ hasText: token }).waitFor();
    await screenshot(page, 'journey-new-user-connect-sdk');

    // From outside the console: what the snippet names, as an application would use it.
    const code = (await snippet.textContent()) ?? '';
    const baseUrl = /baseUrl: '([^']+)'/.exec(code)![1];
    const flagKey = /get\w+Value\('([^']+)'/.exec(code)![1];
    expect(flagKey).toBe('new-checkout');
    let served = 0;
    for (let i = 0; i < 1000; i++) {
      const res = await fetch(`${baseUrl}/ofrep/v1/evaluate/flags/${flagKey}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ context: { targetingKey: `customer-${i}`, plan: 'pro' } }),
      });
      expect(res.status).toBe(200);
      if (((await res.json()) as { value: boolean }).value === true) served++;
    }
    // A 20% rollout over 1,000 keys: 200 expected, 160-240 is more than four standard deviations.
    expect(served).toBeGreaterThanOrEqual(160);
    expect(served).toBeLessThanOrEqual(240);
    expect((await h.app.request('GET', `/api/flags/new-checkout?serviceId=${serviceId}&environment=production`, { cookie: await cookieOf(page) })).body).toMatchObject({
      enabled: true,
      targeting: [expect.objectContaining({ rolloutPercentage: 20, value: true })],
    });
  }, 120_000);
});

async function cookieOf(p: Page): Promise<string> {
  return (await p.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
}

describe('an SRE at 3 a.m.: from the landing page to a production flag killed, with a reason', () => {
  it('takes at most four interactions: "/", the key and Enter, the switch, the reason and Enter', async () => {
    const sre = await h.app.signup({ verified: true, name: 'On-call SRE' });
    const project = (await sre.request('POST', '/api/projects', { name: 'Payments' })).body.id as string;
    const service = (await sre.request('POST', '/api/services', { projectId: project, name: 'Card API' })).body.id as string;
    for (const key of ['card-retries', 'card-tokenizer-v2', 'card-3ds-fallback']) {
      expect((await sre.request('POST', '/api/flags', { key, serviceId: service, type: 'boolean', defaultValue: false })).status).toBe(201);
      expect((await sre.request('POST', `/api/flags/${key}/toggle?serviceId=${service}&environment=production`, { enabled: true })).status).toBe(200);
    }
    const sreContext = await h.newPage();
    await h.signIn(sreContext, sre.cookie);
    await sreContext.goto('/');
    await sreContext.getByRole('heading', { level: 1, name: /^Projects/ }).waitFor();

    let interactions = 0;
    const interact = async (step: () => Promise<void>) => {
      interactions++;
      await step();
    };
    // 1. The search shortcut, from wherever the console opened.
    await interact(() => sreContext.keyboard.press('/'));
    // 2. The flag's key, and Enter: its production page.
    await interact(async () => {
      await sreContext.getByRole('combobox', { name: 'Search flags in all projects' }).fill('tokenizer');
      await sreContext.getByRole('listbox', { name: 'Flags found' }).getByRole('option', { name: /card-tokenizer-v2/ }).waitFor();
      await sreContext.keyboard.press('Enter');
    });
    await sreContext.waitForURL((url) => url.pathname.endsWith('/flags/card-tokenizer-v2') && url.searchParams.get('environment') === 'production');
    // 3. The production switch.
    await interact(() => sreContext.getByRole('switch', { name: 'Enabled in production' }).click());
    // 4. The reason, in the field the confirmation opened focused on, and Enter.
    await interact(async () => {
      await sreContext.getByRole('dialog', { name: /Turn card-tokenizer-v2 off in production/ }).waitFor();
      await sreContext.keyboard.type('Card declines spiking since 02:51');
      await screenshot(sreContext, 'journey-sre-kill-confirmation');
      await sreContext.keyboard.press('Enter');
    });
    expect(interactions).toBeLessThanOrEqual(4);

    const killed = async () => (await sre.request('GET', `/api/flags/card-tokenizer-v2?serviceId=${service}&environment=production`)).body.enabled === false;
    for (let i = 0; i < 100 && !(await killed()); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await killed()).toBe(true);
    await sreContext.getByRole('switch', { name: 'Enabled in production', checked: false }).waitFor();
    await screenshot(sreContext, 'journey-sre-killed');
    const [entry] = (await sre.request('GET', `/api/audit?projectId=${project}&action=flag.toggle`)).body.logs;
    expect(entry).toMatchObject({ resourceName: 'card-tokenizer-v2', metadata: expect.objectContaining({ environment: 'production', reason: 'Card declines spiking since 02:51' }) });
    // The other flags of production are untouched.
    expect((await sre.request('GET', `/api/flags/card-retries?serviceId=${service}&environment=production`)).body.enabled).toBe(true);
  }, 120_000);
});
