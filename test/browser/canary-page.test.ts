import type { Locator, Page } from 'playwright-core';
import { eventually, type TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * One flag's canary page speaks one language (docs/canary.md#in-the-console): a gate that waits on
 * too little data reads "Waiting for data" everywhere, and the numbers in the summary are the
 * numbers of the table, from the same check; after an abort the guardrail panel tells the
 * restoration; a viewer sees the release controls disabled with the reason, a member the
 * guardrail settings. Canaries, traffic and roles are set up through the API.
 */

let h: ConsoleHarness;
let owner: TestUser;
let projectId: string;
let serviceId: string;
let sdkToken: string;
let viewerCookie: string;
let memberCookie: string;
const flagKey = 'new-checkout';
const RULE = { id: 'beta', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: true };

const VIEWER_CANARY = 'Viewers cannot start, advance or abort canaries: that needs the member, admin or owner role in this project.';
const GUARDRAIL_SETTINGS = 'Changing the guardrail settings needs the owner or admin role in this project.';

beforeAll(async () => {
  // Evaluation events reach the warehouse within 200 ms, so the first gate check sees them.
  h = await startConsole({ EVAL_EVENTS_FLUSH_MS: '200', ANALYTICS_FLUSH_MS: '200' });
  owner = await h.app.signup({ verified: true });
  projectId = (await owner.request('POST', '/api/projects', { name: 'Canary Shop' })).body.id;
  serviceId = (await owner.request('POST', '/api/services', { projectId, name: 'Checkout API' })).body.id;
  const flag = await owner.request('POST', '/api/flags', { key: flagKey, name: 'New checkout', type: 'boolean', serviceId, environment: 'production', enabled: true, defaultValue: false, targeting: [RULE] });
  expect(flag.status).toBe(201);
  sdkToken = (await owner.request('POST', `/api/projects/${projectId}/tokens`, { name: 'sdk', permissions: { read: true } })).body.value;
  const viewer = await h.app.signup({ verified: true, name: 'Vera Viewer' });
  const member = await h.app.signup({ verified: true, name: 'Max Member' });
  expect((await owner.request('POST', `/api/projects/${projectId}/members`, { userId: viewer.id, role: 'viewer' })).status).toBe(201);
  expect((await owner.request('POST', `/api/projects/${projectId}/members`, { userId: member.id, role: 'member' })).status).toBe(201);
  viewerCookie = viewer.cookie;
  memberCookie = member.cookie;
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

/** The text of the elements that describe a control (aria-describedby). */
async function description(page: Page, control: Locator): Promise<string> {
  const ids = (await control.getAttribute('aria-describedby'))?.split(' ') ?? [];
  const texts = await Promise.all(ids.map((id) => page.locator(`[id="${id}"]`).textContent()));
  return texts.join(' ').trim();
}

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
const releasePath = () => `/projects/${projectId}/releases/flags/${flagKey}?serviceId=${serviceId}&environment=production`;

describe('the canary page', () => {
  let page: Page;
  beforeAll(async () => {
    page = await h.signedInPage(owner.cookie);
  });

  it('shows a gate waiting on too little data as one state, with the counts of one check', async () => {
    // A 30 s soak checked every 3 s; 40 users are far from the 100 exposures per cohort it needs.
    const started = await owner.request('POST', `/api/flags/${flagKey}/canary`, {
      serviceId,
      environment: 'production',
      ruleId: 'beta',
      initialRolloutPercent: 10,
      rampStepPercent: 20,
      targetRolloutPercent: 50,
      soakPeriodMinutes: 0.5,
      errorRateGateDelta: 0.01,
      latencyGateDeltaMs: 100,
      minSamplesPerCohort: 100,
      alpha: 0.05,
      autoRollbackOnBreach: true,
    });
    expect(started.status).toBe(201);
    await betaTraffic(40);
    await eventually(async () => {
      const health = (await owner.request('GET', canaryPath())).body.health;
      return health.gate && health.gate.treatment.exposures + health.gate.control.exposures === 40;
    }, 60_000);

    await page.goto(releasePath());
    const summary = page.getByRole('region', { name: 'Canary' }).locator('.rs-summary');
    await summary.getByText('Waiting for data', { exact: true }).waitFor({ timeout: 15_000 });
    const stage1 = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'Stage 1: 10%' }) });
    await stage1.getByText('Gate: Waiting for data').waitFor();
    // No second vocabulary for the same state.
    for (const word of ['Healthy', 'Insufficient data', 'Gate: Wait']) expect(await page.getByText(word, { exact: true }).count()).toBe(0);

    // The summary's counts are the table's, from the check it names.
    const evidence = page.getByText(/^At the last gate check/);
    const text = (await evidence.textContent()) ?? '';
    expect(text).toMatch(/^At the last gate check, .+: \d+ treatment \/ \d+ control exposures \(100 needed per cohort\)$/);
    const [, treatment, control] = /(\d+) treatment \/ (\d+) control/.exec(text)!;
    expect(Number(treatment) + Number(control)).toBe(40);
    expect(await stage1.getByRole('row', { name: /^Treatment/ }).getByRole('cell').first().textContent()).toBe(treatment);
    expect(await stage1.getByRole('row', { name: /^Control/ }).getByRole('cell').first().textContent()).toBe(control);
    await screenshot(page, 'canary-page-waiting-for-data');

    // Advancing runs the gate, which waits: told as waiting, not as a red failure.
    await page.getByRole('button', { name: 'Advance stage' }).click();
    const feedback = page.getByRole('status').filter({ hasText: 'Not advanced' });
    await feedback.waitFor({ timeout: 15_000 });
    expect(await feedback.textContent()).toBe('Not advanced: the gate is waiting for data, so the stage keeps soaking.');
    expect(await feedback.getAttribute('class')).not.toContain('form-error');
    await screenshot(page, 'canary-page-advance-waiting');
  }, 90_000);

  it('shows a viewer the release controls disabled with the reason', async () => {
    const viewer = await h.signedInPage(viewerCookie);
    await viewer.goto(releasePath());
    const advance = viewer.getByRole('button', { name: 'Advance stage' });
    await advance.waitFor({ timeout: 15_000 });
    for (const name of ['Advance stage', 'Force advance…', 'Abort canary…']) {
      const button = viewer.getByRole('button', { name });
      expect(await button.isDisabled()).toBe(true);
      expect(await description(viewer, button)).toBe(VIEWER_CANARY);
    }
    await screenshot(viewer, 'canary-page-viewer');

    await viewer.goto(`/projects/${projectId}/releases`);
    const start = viewer.getByRole('button', { name: 'Start canary' });
    await start.waitFor();
    expect(await start.isDisabled()).toBe(true);
    expect(await description(viewer, start)).toBe(VIEWER_CANARY);
    await screenshot(viewer, 'releases-viewer');

    await viewer.goto(`/projects/${projectId}/releases/guardrails`);
    const save = viewer.getByRole('button', { name: 'Save guardrail settings' });
    await save.waitFor();
    expect(await save.isDisabled()).toBe(true);
    expect(await description(viewer, save)).toBe(GUARDRAIL_SETTINGS);
    expect(await viewer.getByLabel('Watch window (minutes)').isDisabled()).toBe(true);
    await viewer.close();
    // Nothing was changed.
    expect((await owner.request('GET', canaryPath())).body.status).toBe('running');
  }, 60_000);

  it('lets a member use the canary controls but not the guardrail settings', async () => {
    const member = await h.signedInPage(memberCookie);
    await member.goto(releasePath());
    const advance = member.getByRole('button', { name: 'Advance stage' });
    await advance.waitFor({ timeout: 15_000 });
    expect(await advance.isDisabled()).toBe(false);
    expect(await member.getByText(VIEWER_CANARY).count()).toBe(0);

    await member.goto(`/projects/${projectId}/releases/guardrails`);
    const save = member.getByRole('button', { name: 'Save guardrail settings' });
    await save.waitFor();
    expect(await save.isDisabled()).toBe(true);
    expect(await description(member, save)).toBe(GUARDRAIL_SETTINGS);
    await screenshot(member, 'guardrails-member');
    await member.close();
  }, 60_000);

  it('after an abort, tells the restoration in the guardrail panel', async () => {
    await page.goto(releasePath());
    await page.getByRole('button', { name: 'Abort canary…' }).click();
    const confirm = page.getByRole('group', { name: 'Confirm abort' });
    await confirm.getByLabel('Reason').fill('Checkout errors in the support queue');
    await confirm.getByRole('button', { name: 'Confirm abort' }).click();
    await page.getByText('Aborted: the flag is back to its content from before the canary.').waitFor({ timeout: 20_000 });
    const summary = page.getByRole('region', { name: 'Canary' }).locator('.rs-summary');
    await summary.getByText('Aborted', { exact: true }).waitFor();

    const versions = (await owner.request('GET', `/api/flags/${flagKey}?serviceId=${serviceId}&environment=production`)).body.version as number;
    const guardrail = page.getByRole('region', { name: 'Guardrail' });
    await guardrail.getByText(new RegExp(`^Restored as version ${versions} \\(the content of version 1\\) by the canary abort at `)).waitFor({ timeout: 15_000 });
    expect(await guardrail.getByText(/no earlier version/).count()).toBe(0);
    await screenshot(page, 'canary-page-aborted');
  }, 60_000);
});
