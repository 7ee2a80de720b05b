import type { Page } from 'playwright-core';
import { eventually, type TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * Release safety in the console: a canary started from the form (the API's
 * validation error beside its field first), its live timeline with stage 1 running, aborted after
 * a confirmation (the flag restored, checked through the API), the abort in the rollback history
 * and the project's list, and the guardrails view. The canary runs on the test app's own
 * Temporal worker; the data is set up through the API.
 */

let h: ConsoleHarness;
let page: Page;
let owner: TestUser;
let projectId: string;
let serviceId: string;
let sdkToken: string;
const flagKey = 'new-checkout';
const RULE = { id: 'beta', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: true };

beforeAll(async () => {
  // Evaluation events reach the warehouse within 200 ms, so the first gate check sees them.
  h = await startConsole({ EVAL_EVENTS_FLUSH_MS: '200', ANALYTICS_FLUSH_MS: '200' });
  owner = await h.app.signup({ verified: true });
  const project = await owner.request('POST', '/api/projects', { name: 'Release Shop' });
  projectId = project.body.id;
  const service = await owner.request('POST', '/api/services', { projectId, name: 'Checkout API' });
  serviceId = service.body.id;
  const flag = await owner.request('POST', '/api/flags', { key: flagKey, name: 'New checkout', type: 'boolean', serviceId, environment: 'production', enabled: true, defaultValue: false, targeting: [RULE] });
  expect(flag.status).toBe(201);
  sdkToken = (await owner.request('POST', `/api/projects/${projectId}/tokens`, { name: 'sdk', permissions: { read: true } })).body.value;
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
/** Evaluations of users the rule holds for (plan beta): the rollout splits them into treatment and control. */
async function betaTraffic(users: number): Promise<void> {
  for (let i = 0; i < users; i++) {
    const res = await h.app.request('POST', '/api/flags/evaluate', {
      token: sdkToken,
      body: { flagKey, serviceId, environment: 'production', context: { targetingKey: `user-${i}`, plan: 'beta' } },
    });
    expect(res.status).toBe(200);
  }
}

const canaryPath = () => `/api/flags/${flagKey}/canary?serviceId=${serviceId}&environment=production`;

describe('release safety in the console', () => {
  it('starts a canary on a rule: the API problem shows beside its field, then stage 1 runs', async () => {
    await page.goto(`/projects/${projectId}/releases`);
    await heading('Releases').waitFor();
    await page.getByText('No canary has been started in this project yet.').waitFor();
    await page.getByRole('combobox', { name: 'Flag' }).locator('option', { hasText: flagKey }).waitFor({ state: 'attached' });
    expect(await page.getByRole('combobox', { name: 'Rule' }).inputValue()).toBe('beta');

    await page.getByLabel('Initial rollout %').fill('0');
    // A 30 s soak: the gate is checked every 3 s.
    await page.getByLabel('Soak per stage (minutes)').fill('0.5');
    await page.getByRole('button', { name: 'Start canary' }).click();
    await page.getByText('Check the marked fields.').waitFor();
    expect(await page.getByLabel('Initial rollout %').getAttribute('aria-invalid')).toBe('true');
    await screenshot(page, 'releases-start-error');

    await page.getByLabel('Initial rollout %').fill('10');
    await page.getByRole('button', { name: 'Start canary' }).click();
    await heading(/Release safety/).waitFor();
    const stage1 = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'Stage 1: 10%' }) });
    await stage1.getByText('Running', { exact: true }).waitFor({ timeout: 15_000 });
    await page.getByRole('heading', { name: 'Stage 3: 50%' }).waitFor();
    await page.getByRole('heading', { name: 'Guardrail' }).waitFor();
    const record = await owner.request('GET', canaryPath());
    expect(record.body.status).toBe('running');
    expect(record.body.ruleId).toBe('beta');
    expect(record.body.config).toMatchObject({ initialRolloutPercent: 10, rampStepPercent: 20, targetRolloutPercent: 50, soakPeriodMinutes: 0.5 });
    expect(record.body.currentStage.index).toBe(0);

    // Traffic under the rule: the live timeline shows the gate's cohorts, short of the 100 exposures per side it needs.
    const stage2Top = async () => (await page.getByRole('heading', { name: 'Stage 2: 30%' }).boundingBox())?.y;
    const before = await stage2Top();
    await betaTraffic(40);
    await stage1.getByText('Gate: Waiting for data').waitFor({ timeout: 15_000 });
    await stage1.getByRole('row', { name: /^Treatment/ }).waitFor();
    // The first check fills the reserved box: nothing below it moved.
    expect(await stage2Top()).toBe(before);
    await screenshot(page, 'canary-timeline');

    // Advancing without force runs the gate now, which waits for data: the stage keeps soaking.
    await page.getByRole('button', { name: 'Advance stage' }).click();
    await page.getByRole('status').filter({ hasText: 'Not advanced: the gate is waiting for data' }).waitFor({ timeout: 15_000 });

    // Cancel closes the confirmation and gives the focus back to the button that opened it.
    await page.getByRole('button', { name: 'Force advance…' }).click();
    await page.getByRole('group', { name: 'Confirm force advance' }).getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('group', { name: 'Confirm force advance' }).waitFor({ state: 'detached' });
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Force advance…');
  });

  it('forces the next stage after a confirmation', async () => {
    await page.getByRole('button', { name: 'Force advance…' }).click();
    await page.getByRole('group', { name: 'Confirm force advance' }).getByRole('button', { name: 'Confirm force advance' }).click();
    const stage2 = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'Stage 2: 30%' }) });
    await stage2.getByText('Running', { exact: true }).waitFor({ timeout: 15_000 });
    await page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'Stage 1: 10%' }) }).getByText('Forced', { exact: true }).waitFor();
    const record = await owner.request('GET', canaryPath());
    expect(record.body.currentStage).toMatchObject({ index: 1, rolloutPercent: 30 });
    expect(record.body.completedStages[0].forcedBy).toBe(owner.email);
  });

  it('aborts it after a confirmation, and the flag is restored', async () => {
    await page.getByRole('button', { name: 'Abort canary…' }).click();
    const confirm = page.getByRole('group', { name: 'Confirm abort' });
    await confirm.getByLabel('Reason').fill('Checkout errors in the support queue');
    await confirm.getByRole('button', { name: 'Confirm abort' }).click();
    await page.getByText('Aborted: the flag is back to its content from before the canary.').waitFor({ timeout: 20_000 });
    await page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'Stage 2: 30%' }) }).getByText('Stopped here').waitFor();
    await page.getByRole('cell', { name: /Canary aborted by .*Checkout errors in the support queue/ }).waitFor();
    await page.setViewportSize({ width: 390, height: 800 });
    await screenshot(page, 'canary-timeline-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });

    const record = await owner.request('GET', canaryPath());
    expect(record.body.status).toBe('aborted');
    const flag = await owner.request('GET', `/api/flags/${flagKey}?serviceId=${serviceId}&environment=production`);
    expect(flag.body.targeting).toEqual([RULE]);
  });

  it('lists the canary in the project and shows the guardrails', async () => {
    await page.getByRole('link', { name: 'Releases', exact: true }).first().click();
    await heading('Releases').waitFor();
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: flagKey }) });
    await row.getByText('Aborted').waitFor();
    await screenshot(page, 'releases');

    await page.getByRole('link', { name: 'Guardrail checks and rollbacks' }).click();
    await heading('Guardrails').waitFor();
    expect(await page.getByLabel('Roll back a tripped change automatically (otherwise only notify)').isChecked()).toBe(true);
    expect(await page.getByLabel('Watch window (minutes)').inputValue()).toBe('15');
    // The abort is in the project's rollback history.
    await page.getByRole('cell', { name: flagKey, exact: true }).waitFor();
    await screenshot(page, 'guardrails');

    await page.getByLabel('Watch window (minutes)').fill('0');
    await page.getByRole('button', { name: 'Save guardrail settings' }).click();
    await page.getByText('Check the marked fields.').waitFor();
    expect(await page.getByLabel('Watch window (minutes)').getAttribute('aria-invalid')).toBe('true');
    await page.getByLabel('Watch window (minutes)').fill('30');
    await page.getByRole('button', { name: 'Save guardrail settings' }).click();
    await eventually(async () => (await owner.request('GET', `/api/projects/${projectId}`)).body.guardrailWindowMinutes === 30, 5_000);
    await page.getByText('Check the marked fields.').waitFor({ state: 'detached' });
  });
});
