import type { Page } from 'playwright-core';
import type { TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * A flag's history, the project's audit trail and explain in the console: a
 * flag created and changed twice through the API; in the browser its versions, the field-level
 * diff of the latest change, a context explained against the current rules, a confirmed rollback
 * to version 1 (checked through the API), and the audit entries of all of it.
 */

let h: ConsoleHarness;
let page: Page;
let owner: TestUser;
let projectId: string;
let serviceId: string;
const flagKey = 'new-checkout';
const rule = (plan: string) => ({ id: 'paying', conditions: [{ property: 'plan', operator: 'equals', value: plan }], value: true });
const flagPath = () => `/api/flags/${flagKey}?serviceId=${serviceId}&environment=production`;

beforeAll(async () => {
  h = await startConsole();
  owner = await h.app.signup({ verified: true });
  projectId = (await owner.request('POST', '/api/projects', { name: 'History Shop' })).body.id;
  serviceId = (await owner.request('POST', '/api/services', { projectId, name: 'Checkout API' })).body.id;
  const created = await owner.request('POST', '/api/flags', { key: flagKey, name: 'New checkout', type: 'boolean', serviceId, environment: 'production', enabled: true, defaultValue: false });
  expect(created.status).toBe(201);
  // Version 2 adds a rule and renames; version 3 changes the rule's condition.
  expect((await owner.request('PATCH', flagPath(), { name: 'New checkout flow', targeting: [rule('pro')] })).status).toBe(200);
  expect((await owner.request('PATCH', flagPath(), { targeting: [rule('enterprise')] })).status).toBe(200);
  page = await h.newPage();
  // Signed in with the API's session cookie: the sign-in form is the journey test's subject.
  await h.signIn(page, owner.cookie);
}, 60_000);
afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });
const version = (n: number) => page.getByRole('listitem', { name: new RegExp(`^Version ${n}\\b`) });

describe("a flag's history, explain and the audit trail", () => {
  it('lists the versions with who changed what, and shows the latest diff field by field', async () => {
    await page.goto(`/projects/${projectId}/flags/${flagKey}/history?serviceId=${serviceId}&environment=production`);
    await heading(`History of ${flagKey}`).waitFor();
    await version(3).waitFor();
    expect(await page.getByRole('list', { name: 'Versions' }).getByRole('listitem').count()).toBe(3);
    await version(3).getByText('Changed: targeting').waitFor();
    await version(2).getByText('Changed: name, targeting').waitFor();
    await version(1).getByText('The first version.').waitFor();
    await version(3).getByText(owner.email).waitFor();
    // The current version cannot be rolled back to; the older ones can.
    expect(await version(3).getByRole('button', { name: /^Roll back/ }).count()).toBe(0);
    const flagId = (await owner.request('GET', flagPath())).body.id;
    expect(await page.getByRole('link', { name: 'Audit trail of this flag in production' }).getAttribute('href')).toBe(`/projects/${projectId}/audit?resourceType=flag&resourceId=${flagId}`);
    await screenshot(page, 'flag-history');

    const show = page.getByRole('button', { name: 'Show changes in version 3' });
    await show.click();
    expect(await page.getByRole('button', { name: 'Hide changes in version 3' }).getAttribute('aria-expanded')).toBe('true');
    const diff = page.getByRole('table', { name: 'Version 3 compared with version 2' });
    const row = diff.getByRole('row', { name: /targeting\[paying\]\.conditions\[0\]\.value/ });
    expect(await row.getByRole('cell').allTextContents()).toEqual(['Changed', '"pro"', '"enterprise"'].map((text, i) => (i === 0 ? `~ ${text}` : text)));
    expect(await diff.getByRole('row').count()).toBe(2); // the header and the one changed field
    await screenshot(page, 'flag-diff');
  });

  it('explains a context: the reason, each rule and condition checked, and a clear validation error', async () => {
    await page.getByRole('link', { name: 'Explain a context' }).click();
    await heading(`Explain ${flagKey}`).waitFor();
    await page.getByLabel('Targeting key').fill('user-42');
    await page.getByLabel('Attribute 1 name').fill('plan');
    await page.getByLabel('Attribute 1 value').fill('enterprise');
    await page.getByRole('button', { name: 'Add attribute' }).click();
    await page.getByLabel('Attribute 2 name').fill('plan');
    await page.getByLabel('Attribute 2 value').fill('free');
    await page.getByRole('button', { name: 'Explain', exact: true }).click();
    // A duplicate attribute is caught before sending, beside its field.
    await page.getByText('Attribute 2 "plan" is already attribute 1').waitFor();
    expect(await page.getByLabel('Attribute 2 name').getAttribute('aria-invalid')).toBe('true');
    await page.getByRole('button', { name: 'Remove attribute 2' }).click();
    await page.getByRole('button', { name: 'Explain', exact: true }).click();

    const result = page.getByRole('region', { name: 'Result' });
    await result.getByText('TARGETING_MATCH').waitFor();
    await result.getByText('Targeting rule paying matched.').waitFor();
    const condition = result.getByRole('table', { name: 'Conditions of rule paying' }).getByRole('row').nth(1);
    expect(await condition.getByRole('cell').allTextContents()).toEqual(['plan', 'equals', '"enterprise"', '"enterprise"', '✓ Passed']);

    // The same context as JSON, then a JSON mistake shown beside the field.
    await page.getByRole('radio', { name: 'JSON' }).check();
    const json = page.getByLabel('Context (JSON)');
    expect(JSON.parse(await json.inputValue())).toEqual({ targetingKey: 'user-42', plan: 'enterprise' });
    await json.fill('{"targetingKey": 42}');
    await page.getByRole('button', { name: 'Explain', exact: true }).click();
    await page.getByText('The context targetingKey must be a string').waitFor();
    await json.fill('{"targetingKey": "user-7", "plan": "free"}');
    await page.getByRole('button', { name: 'Explain', exact: true }).click();
    await result.getByText('No rule matched and the flag has no variants').waitFor();
    await result.getByText('✗ Failed').waitFor();
    await screenshot(page, 'explain');
  });

  it('rolls back to version 1 after a confirmation, and the flag is as it was', async () => {
    await page.getByRole('link', { name: 'History' }).click();
    await heading(`History of ${flagKey}`).waitFor();
    // Cancelling the confirm step changes nothing and returns focus to where it began.
    await version(2).getByRole('button', { name: 'Roll back to version 2' }).click();
    await version(2).getByRole('button', { name: 'Cancel' }).click();
    await page.waitForFunction((el) => !!el && el === el.ownerDocument.activeElement, await version(2).getByRole('button', { name: 'Roll back to version 2' }).elementHandle());

    await version(1).getByRole('button', { name: 'Roll back to version 1' }).click();
    const confirm = page.getByRole('button', { name: 'Confirm rollback to version 1' });
    // Focus moves to the confirmation; nothing changed yet.
    await page.waitForFunction((el) => !!el && el === el.ownerDocument.activeElement, await confirm.elementHandle());
    expect((await owner.request('GET', flagPath())).body.version).toBe(3);
    await confirm.click();
    await page.getByRole('status').filter({ hasText: 'Rolled back to version 1: the flag is now at version 4' }).waitFor();
    await version(4).getByText('Rolled back').waitFor();

    const flag = (await owner.request('GET', flagPath())).body;
    expect(flag).toMatchObject({ version: 4, name: 'New checkout', targeting: [], enabled: true, defaultValue: false });
  });

  it("shows the project's audit trail, filtered by action", async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Audit' }).click();
    await heading('Audit trail').waitFor();
    await page.getByText('6 entries, newest first.').waitFor(); // project, service, flag create, two updates, the rollback
    const rows = page.getByRole('table').getByRole('row');
    expect(await rows.filter({ hasText: 'flag.update' }).count()).toBe(3);
    await rows.filter({ hasText: 'flag.create' }).getByRole('link', { name: `flag ${flagKey}` }).waitFor();
    await screenshot(page, 'audit');
    // A narrow screen: the filters stack and the table scrolls inside its box, not the page.
    await page.setViewportSize({ width: 390, height: 800 });
    const { scrollWidth, clientWidth } = await page.locator('html').evaluate((el) => ({ scrollWidth: el.scrollWidth, clientWidth: el.clientWidth }));
    expect(scrollWidth).toBeLessThanOrEqual(clientWidth);
    await page.setViewportSize({ width: 1280, height: 800 });

    await page.getByLabel('Action').selectOption('flag.create');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('1 entry match the filters, newest first.').waitFor();
    expect(new URL(page.url()).searchParams.get('action')).toBe('flag.create');
    await page.getByRole('button', { name: /^Show details/ }).click();
    await page.getByRole('table', { name: 'Fields flag.create changed' }).getByRole('row', { name: /^name / }).waitFor();
  });

  it('pages through a long history; the oldest version of a page is still compared with the one before it', async () => {
    for (let i = 1; i <= 20; i++) expect((await owner.request('PATCH', flagPath(), { description: `step ${i}` })).status).toBe(200);
    await page.goto(`/projects/${projectId}/flags/${flagKey}/history?serviceId=${serviceId}&environment=production`);
    await version(24).waitFor();
    const pages = page.getByRole('navigation', { name: 'Versions pages' });
    await pages.getByText('1–20 of 24').waitFor();
    // Version 5 is the last on this page; version 4 (the rollback) comes from the next.
    await page.getByRole('button', { name: 'Show changes in version 5' }).click();
    const row = page.getByRole('table', { name: 'Version 5 compared with version 4' }).getByRole('row', { name: /^description / });
    expect(await row.getByRole('cell').allTextContents()).toEqual(['~ Changed', '""', '"step 1"']);
    await pages.getByRole('button', { name: 'Next page' }).click();
    await pages.getByText('21–24 of 24').waitFor();
    await version(4).getByText('Rolled back').waitFor();
    expect(await pages.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
  });
});
