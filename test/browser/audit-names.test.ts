import type { Page } from 'playwright-core';
import { eventually, type TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * The audit trail and a flag's history name who acted: an API token by its name, a trigger, a
 * canary by its flag and environment, a person by name; never the recorded `token:tok_...`.
 * The filters pick from what the trail holds, and a long entry keeps the changes column in view
 * at 1280 px.
 */

let h: ConsoleHarness;
let page: Page;
let owner: TestUser;
let projectId: string;
let serviceId: string;
let tokenId: string;
const flagKey = 'names-checkout';
const scope = () => `serviceId=${serviceId}&environment=production`;
const LONG_ID = `res_${'a1b2c3d4e5'.repeat(12)}`;

beforeAll(async () => {
  h = await startConsole();
  owner = await h.app.signup({ verified: true, name: 'Ada Owner' });
  projectId = (await owner.request('POST', '/api/projects', { name: 'Names Shop' })).body.id;
  serviceId = (await owner.request('POST', '/api/services', { projectId, name: 'Checkout API' })).body.id;
  const created = await owner.request('POST', '/api/flags', {
    key: flagKey,
    name: 'Names checkout',
    type: 'boolean',
    serviceId,
    environment: 'production',
    enabled: true,
    defaultValue: false,
    targeting: [{ id: 'beta', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: true }],
  });
  expect(created.status).toBe(201);

  const token = await owner.request('POST', `/api/projects/${projectId}/tokens`, { name: 'deploy-bot', permissions: { read: true, write: true } });
  expect(token.status).toBe(201);
  tokenId = token.body.token.id;
  expect((await h.app.request('POST', `/api/flags/${flagKey}/toggle?${scope()}`, { token: token.body.value })).status).toBe(200);

  const trigger = await owner.request('POST', `/api/flags/${flagKey}/triggers`, { serviceId, environment: 'production', action: 'enable', name: 'Pager recovery' });
  expect(trigger.status).toBe(201);
  expect((await h.app.request('POST', new URL(trigger.body.url).pathname)).status).toBe(200);

  // A canary's stage writes the flag as the pipeline; aborting it restores the flag the same way.
  const canary = await owner.request('POST', `/api/flags/${flagKey}/canary`, {
    serviceId,
    initialRolloutPercent: 10,
    targetRolloutPercent: 50,
    rampStepPercent: 20,
    soakPeriodMinutes: 30,
    errorRateGateDelta: 0.05,
    latencyGateDeltaMs: 100,
    autoRollbackOnBreach: false,
    minSamplesPerCohort: 50,
    maxWaitMinutes: 60,
  });
  expect(canary.status).toBe(201);
  expect((await owner.request('POST', `/api/flags/${flagKey}/canary/abort`, { serviceId, environment: 'production', reason: 'names test done' })).status).toBe(200);
  await eventually(async () => {
    const audit = await owner.request('GET', `/api/audit?projectId=${projectId}&limit=100`);
    return (audit.body.logs as { actor: string }[]).some((l) => l.actor.startsWith('canary:'));
  }, 60_000);

  // An entry with a long resource id, a long field name and a 200-character value, with a reason.
  const longValue = 'v'.repeat(200);
  await h.app.platform.db.sql`
    INSERT INTO audit_logs (id, project_id, user_id, actor, action, resource_type, resource_id, resource_name, before, after, changes, metadata)
    VALUES ('aud_names_long', ${projectId}, ${owner.id}, ${`token:${tokenId}`}, 'flag.update', 'flag', ${LONG_ID}, ${LONG_ID},
            ${h.app.platform.db.sql.json({ description: '' })}, ${h.app.platform.db.sql.json({ description: longValue })},
            ${h.app.platform.db.sql.json([{ field: `description_${'x'.repeat(80)}`, oldValue: '', newValue: longValue }])},
            ${h.app.platform.db.sql.json({ reason: 'Rolled out after the incident review', serviceId })})`;

  page = await h.newPage();
  await page.setViewportSize({ width: 1280, height: 800 });
  await h.signIn(page, owner.cookie);
}, 120_000);
afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });

describe('names in the audit trail and the history', () => {
  it('names tokens, triggers, canaries and people, and shows the reason', async () => {
    await page.goto(`/projects/${projectId}/audit`);
    await heading('Audit trail').waitFor();
    const table = page.getByRole('table', { name: 'Audit entries, newest first' });
    await table.getByText('API token “deploy-bot”').first().waitFor();
    await table.getByText('Trigger “Pager recovery”').first().waitFor();
    await table.getByText(`Canary of ${flagKey} (production)`).first().waitFor();
    await table.getByText('Ada Owner').first().waitFor();
    await table.getByText('Reason: Rolled out after the incident review').waitFor();
    const text = await table.innerText();
    expect(text).not.toMatch(/(token|canary|trigger|system):/);
    // The recorded actor stays at hand in the tooltip.
    expect(await table.getByText('API token “deploy-bot”').first().getAttribute('title')).toContain(`token:${tokenId}`);
    await screenshot(page, 'audit-names-1280');
  });

  it('keeps the changes column in view at 1280 px with long ids and a 200-character value', async () => {
    const row = page.getByRole('row').filter({ hasText: 'Reason: Rolled out after the incident review' });
    const changes = row.getByRole('cell').nth(4);
    const box = (await changes.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(1280);
    const header = (await page.getByRole('columnheader', { name: 'Changes' }).boundingBox())!;
    expect(header.x + header.width).toBeLessThanOrEqual(1280);
    await row.getByRole('button', { name: /^Show details/ }).click();
    const details = page.locator('#audit-aud_names_long');
    await details.getByText('v'.repeat(100), { exact: false }).first().waitFor();
    const detailsBox = (await details.boundingBox())!;
    expect(detailsBox.x + detailsBox.width).toBeLessThanOrEqual(1280);
    await screenshot(page, 'audit-names-long-entry-1280');
  });

  it('filters from pick lists of what the trail holds, by action and by who', async () => {
    const facets = (await owner.request('GET', `/api/audit/facets?projectId=${projectId}`)).body as { actions: string[]; resourceTypes: string[] };
    const action = page.getByLabel('Action');
    expect(await action.evaluate((el) => el.tagName)).toBe('SELECT');
    expect(await action.locator('option').allTextContents()).toEqual(['Any action', ...facets.actions]);
    expect(await page.getByLabel('Resource type').locator('option').allTextContents()).toEqual(['Any type', ...facets.resourceTypes]);

    const who = page.getByLabel('Who');
    expect(await who.evaluate((el) => el.tagName)).toBe('SELECT');
    await who.selectOption({ label: 'API token “deploy-bot”' });
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('2 entries match the filters, newest first.').waitFor();
    expect(new URL(page.url()).searchParams.get('actor')).toBe(`token:${tokenId}`);
    const rows = page.getByRole('table', { name: 'Audit entries, newest first' }).locator(':scope > tbody > tr:not(.audit-details)');
    // The unfiltered rows may still be leaving the page on a busy machine.
    await rows.nth(2).waitFor({ state: 'detached' });
    expect(await rows.count()).toBe(2);
    expect(await rows.filter({ hasText: 'API token “deploy-bot”' }).count()).toBe(2);
    await screenshot(page, 'audit-names-filtered-by-token');
  });

  it("names who made each version in the flag's history", async () => {
    await page.goto(`/projects/${projectId}/flags/${flagKey}/history?${scope()}`);
    await heading(`History of ${flagKey}`).waitFor();
    const versions = page.getByRole('list', { name: 'Versions' });
    await versions.getByText('API token “deploy-bot”').waitFor();
    await versions.getByText('Trigger “Pager recovery”').waitFor();
    await versions.getByText(`Canary of ${flagKey} (production)`).first().waitFor();
    await versions.getByText('Ada Owner').first().waitFor();
    expect(await versions.innerText()).not.toMatch(/(token|canary|trigger):/);
    await screenshot(page, 'flag-history-names');
  });
});
