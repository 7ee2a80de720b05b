import type { Page } from 'playwright-core';
import { eventually, type TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * The metrics pages against real traffic: a flag evaluated through the data plane with a project
 * read token, outcome events and web vitals sent the way SDKs and browsers send them, a bandit
 * experiment reallocated once; the flag's page shows the charts, the totals and breakdowns the
 * API answers and a marker for a toggle; the project's page the evaluations, vitals, a funnel by
 * variant and the bandit's allocations. Everything but the pages is set up through the API.
 */

let h: ConsoleHarness;
let page: Page;
let user: TestUser;
let projectId: string;
let serviceId: string;
const flagKey = 'checkout-redesign';
const banditKey = 'button-colour';
const EVALUATIONS = 36;

function expectStatus(res: { status: number; text: string }, status: number, what: string) {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${res.text}`);
}

beforeAll(async () => {
  // Short flushes: the warehouse has the events within a second instead of five.
  h = await startConsole({ EVAL_EVENTS_FLUSH_MS: '300', ANALYTICS_FLUSH_MS: '300' });
  page = await h.newPage();
  user = await h.app.signup({ name: 'Metrics Tester', verified: true });
  await h.signIn(page, user.cookie);

  const project = await user.request('POST', '/api/projects', { name: 'Metrics Shop' });
  expectStatus(project, 201, 'create project');
  projectId = project.body.id;
  const service = await user.request('POST', '/api/services', { projectId, name: 'Storefront' });
  expectStatus(service, 201, 'create service');
  serviceId = service.body.id;
  const flag = { serviceId, environment: 'production', enabled: true };
  expectStatus(await user.request('POST', '/api/flags', { ...flag, key: flagKey, type: 'boolean', defaultValue: true }), 201, 'create flag');
  const variants = [
    { name: 'blue', value: 'blue', weight: 50 },
    { name: 'green', value: 'green', weight: 50 },
  ];
  expectStatus(await user.request('POST', '/api/flags', { ...flag, key: banditKey, type: 'string', defaultValue: 'blue', variants }), 201, 'create variant flag');
  const token = await user.request('POST', `/api/projects/${projectId}/tokens`, { name: 'sdk', permissions: { read: true } });
  expectStatus(token, 201, 'create token');
  const readToken = token.body.value as string;

  // Evaluations through the data plane, as an SDK would make them.
  for (let i = 0; i < EVALUATIONS; i += 12) {
    const batch = Array.from({ length: 12 }, (_, j) =>
      h.app.request('POST', '/api/flags/evaluate', { listener: 'data', token: readToken, body: { flagKey, serviceId, environment: 'production', context: { targetingKey: `u${i + j}` } } }),
    );
    for (const res of await Promise.all(batch)) expectStatus(res, 200, 'evaluate');
  }
  // Outcome events for the funnel: 10 users sign up, 4 of them buy.
  const events = [
    ...Array.from({ length: 10 }, (_, i) => ({ event: 'signup', targetingKey: `u${i}`, timestamp: Date.now() - 1_000 })),
    ...Array.from({ length: 4 }, (_, i) => ({ event: 'purchase', targetingKey: `u${i}` })),
  ];
  const tracked = await h.app.request('POST', '/api/analytics/track', { listener: 'data', token: readToken, body: { serviceId, environment: 'production', events } });
  expectStatus(tracked, 202, 'track');
  // Web vitals from the site's pages.
  const vitals = [1200, 1800, 2500].map((value, i) => ({ type: 'webvital', siteId: serviceId, url: 'https://shop.example/', timestamp: Date.now(), sessionId: `s${i}`, name: 'lcp', value }));
  expectStatus(await h.app.request('POST', '/e', { listener: 'ingest', body: vitals }), 202, 'browser events');
  // A bandit experiment on the variant flag, reallocated once after some rewards.
  const experiment = await user.request('POST', '/api/experiments/bandit', { name: 'Button colour', projectId, serviceId, flagKey: banditKey, minSampleSizePerVariant: 0, seed: 7 });
  expectStatus(experiment, 201, 'create experiment');
  for (const [variantName, converted] of [['green', true], ['green', true], ['blue', false], ['green', true], ['blue', false]] as const) {
    expectStatus(await user.request('POST', `/api/experiments/${experiment.body.id}/reward`, { variantName, converted }), 200, 'reward');
  }
  expectStatus(await user.request('POST', `/api/experiments/${experiment.body.id}/reallocate`), 200, 'reallocate');

  // The recorder flushes on its own: wait until the insights count every evaluation.
  await eventually(async () => {
    const res = await user.request('GET', `/api/flags/${flagKey}/metrics?serviceId=${serviceId}&environment=production&range=1h`);
    return res.body?.summary?.totalEvaluations === EVALUATIONS;
  }, 20_000);
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });

describe('the metrics pages', () => {
  it("shows a flag's evaluations, charts, breakdowns and a marker for its toggle", async () => {
    await page.goto(`/projects/${projectId}/flags/${flagKey}/metrics?serviceId=${serviceId}&environment=production&range=1h`);
    await heading(`Metrics of ${flagKey}`).waitFor();
    const summary = page.getByRole('region', { name: 'Summary' });
    await summary.getByRole('definition').first().waitFor();
    expect(await summary.getByRole('term').first().textContent()).toBe('Evaluations');
    expect(await summary.getByRole('definition').first().textContent()).toBe(String(EVALUATIONS));
    // Three charts with a canvas each, each named by its caption and summarized in words.
    const charts = page.getByRole('region', { name: 'Over time' });
    for (const name of ['Evaluations per second', 'Error rate', 'Latency percentiles']) await charts.getByRole('img', { name: new RegExp(`^${name}\\. From `) }).waitFor();
    expect(await charts.locator('canvas').count()).toBe(3);
    // The chart's data as a table, behind a toggle.
    await page.getByRole('button', { name: 'Show data table: Evaluations per second' }).click();
    const table = page.getByRole('table', { name: 'Evaluations per second' });
    expect(await table.getByRole('row').count()).toBe(61);
    await page.getByRole('button', { name: 'Hide data table: Evaluations per second' }).click();
    await table.waitFor({ state: 'detached' });

    // The reason breakdown shows what the API counted, every evaluation under one reason.
    const metrics = await user.request('GET', `/api/flags/${flagKey}/metrics?serviceId=${serviceId}&environment=production&range=1h`);
    const [[reason, reasonCount]] = Object.entries(metrics.body.reasonBreakdown as Record<string, number>);
    expect(reasonCount).toBe(EVALUATIONS);
    const reasons = page.getByRole('table', { name: 'Evaluations by reason' });
    expect(await reasons.getByRole('row', { name: new RegExp(`^${reason} ${EVALUATIONS} 100%`) }).count()).toBe(1);
    expect(await page.getByRole('table', { name: 'Evaluations by value' }).getByRole('row', { name: /^true 36/ }).count()).toBe(1);

    // A toggle through the API appears as a marker after a refresh.
    const changes = page.getByRole('region', { name: 'Toggles and changes' });
    // The flag's creation is in the window already.
    await changes.getByRole('listitem').filter({ hasText: 'Created (version 1)' }).waitFor();
    const toggled = await user.request('POST', `/api/flags/${flagKey}/toggle?serviceId=${serviceId}&environment=production`, { enabled: false });
    expectStatus(toggled, 200, 'toggle');
    await page.getByRole('button', { name: 'Refresh now' }).click();
    await changes.getByRole('listitem').filter({ hasText: 'Turned off' }).waitFor();
    expect(await changes.getByRole('listitem').allTextContents()).toEqual([expect.stringMatching(/^Created \(version 1\) by /), expect.stringMatching(/^Turned off by /)]);
    await screenshot(page, 'flag-metrics');
    // The charts take the dark scheme's colours when it changes (a canvas cannot use CSS variables).
    await page.emulateMedia({ colorScheme: 'dark' });
    await charts.locator('canvas').nth(2).waitFor();
    await screenshot(page, 'flag-metrics-dark');
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('switches the window without leaving the page', async () => {
    await page.getByText('Last 24 hours').click();
    await page.waitForURL(/range=24h/);
    await page.getByRole('button', { name: 'Show data table: Error rate' }).click();
    // 24 hours in 15-minute points.
    await eventually(async () => (await page.getByRole('table', { name: 'Error rate' }).getByRole('row').count()) === 97);
    expect(await page.getByRole('region', { name: 'Summary' }).getByRole('definition').first().textContent()).toBe(String(EVALUATIONS));
    expect(await page.getByRole('link', { name: 'Open the flag' }).getAttribute('href')).toBe(`/projects/${projectId}/flags/${flagKey}?serviceId=${serviceId}&environment=production`);
  });

  it('fits a phone-sized screen: the charts follow the width, nothing scrolls sideways', async () => {
    await page.setViewportSize({ width: 390, height: 800 });
    await eventually(async () => (await page.locator('canvas').first().boundingBox())!.width < 390);
    // A string: the test's TypeScript has no DOM types.
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(page, 'flag-metrics-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("shows the project's evaluations, web vitals, a funnel by variant and the bandit's allocations", async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Metrics' }).click();
    await heading('Metrics').waitFor();
    const evaluations = page.getByRole('region', { name: 'Evaluations' });
    await evaluations.getByRole('img', { name: /^Evaluations per second, production\. From / }).waitFor();
    await evaluations.getByRole('table', { name: 'Busiest flags' }).getByRole('row', { name: `${flagKey} ${EVALUATIONS}` }).waitFor();

    const vitals = page.getByRole('region', { name: 'Visits and web vitals' });
    const lcp = vitals.getByRole('row', { name: /^Largest contentful paint \(LCP\)/ });
    await eventually(async () => /3$/.test((await lcp.textContent()) ?? ''), 10_000);
    await vitals.getByRole('img', { name: /^Web vitals p75 over time\. From / }).waitFor();

    const funnel = page.getByRole('region', { name: 'Funnel by variant' });
    await funnel.getByLabel('Flag').selectOption(flagKey);
    // The API's problem with the steps shows beside them.
    await funnel.getByLabel('Steps').fill('signup');
    await funnel.getByRole('button', { name: 'Show funnel' }).click();
    await funnel.getByText('needs at least 2 steps').waitFor();
    expect(await funnel.getByLabel('Steps').getAttribute('aria-invalid')).toBe('true');
    await funnel.getByLabel('Steps').fill('signup, purchase');
    await funnel.getByRole('button', { name: 'Show funnel' }).click();
    const table = funnel.getByRole('table', { name: /^Funnel of checkout-redesign/ });
    await table.getByRole('row', { name: '1. signup 10 (100%)' }).waitFor();
    await table.getByRole('row', { name: '2. purchase 4 (40%)' }).waitFor();

    const bandits = page.getByRole('region', { name: 'Bandit allocations' });
    await bandits.getByRole('table', { name: 'Current allocation' }).getByRole('row', { name: /^green / }).waitFor();
    const allocations = bandits.getByRole('img', { name: /^Allocation per variant over time/ });
    await allocations.waitFor();
    await bandits.getByRole('button', { name: /^Show data table/ }).click();
    // A row per flag version the experiment wrote (its start, and the reallocation when it moved
    // the weights), and one for now: the latest weights still hold.
    const history = await user.request('GET', `/api/flags/${banditKey}/history?serviceId=${serviceId}&environment=production`);
    const rounds = (history.body.versions as { actor: string }[]).filter((v) => v.actor.startsWith('bandit:')).length;
    expect(rounds).toBeGreaterThanOrEqual(1);
    expect(await bandits.getByRole('table', { name: /^Allocation per variant/ }).getByRole('row').count()).toBe(rounds + 2);
    await screenshot(page, 'project-metrics');
  });
});
