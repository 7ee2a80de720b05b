import type { Page } from 'playwright-core';
import { eventually, type TestUser } from '../support/harness';
import { createProject, expectStatus, opaqueToken, type Project } from '../webhooks/support';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * The metrics pages open on what has data: a flag and project whose traffic is all in the last
 * hour open on the last hour (the user's range= still wins); the site picker opens on the
 * service with browser events and marks the one without; the funnel's steps offer the event
 * names the service reported (GET /api/analytics/events/names, whose abuse cases are here too);
 * the flag page shows conversion per variant with its 95% interval; CLS has its own chart.
 * Evaluations, outcome events and browser events go through the API as SDKs and browsers send them.
 */

let h: ConsoleHarness;
let page: Page;
let project: Project;
let siteId: string;
const flagKey = 'fresh-spike';
const USERS = 40;
/** Outcome events per name: the most frequent is listed first. */
const OUTCOMES = { signup: 10, add_to_cart: 6, purchase: 4 };

beforeAll(async () => {
  h = await startConsole({ EVAL_EVENTS_FLUSH_MS: '300', ANALYTICS_FLUSH_MS: '300' });
  // A service without browser data is created first: the old picker opened on it.
  project = await createProject(h.app);
  const { owner, projectId, serviceId } = project;
  const site = await owner.request('POST', '/api/services', { projectId, name: 'www storefront' });
  expectStatus(site, 201, 'create site');
  siteId = site.body.id;
  const variants = [
    { name: 'blue', value: 'blue', weight: 50 },
    { name: 'green', value: 'green', weight: 50 },
  ];
  const flag = { serviceId, environment: 'production', enabled: true, key: flagKey, type: 'string', defaultValue: 'blue', variants };
  expectStatus(await owner.request('POST', '/api/flags', flag), 201, 'create flag');
  const readToken = await opaqueToken(owner, projectId, { read: true });

  for (let i = 0; i < USERS; i += 10) {
    const batch = Array.from({ length: 10 }, (_, j) =>
      h.app.request('POST', '/api/flags/evaluate', { listener: 'data', token: readToken, body: { flagKey, serviceId, environment: 'production', context: { targetingKey: `u${i + j}` } } }),
    );
    for (const res of await Promise.all(batch)) expectStatus(res, 200, 'evaluate');
  }
  const events = Object.entries(OUTCOMES).flatMap(([event, n]) => Array.from({ length: n }, (_, i) => ({ event, targetingKey: `u${i}` })));
  expectStatus(await h.app.request('POST', '/api/analytics/track', { listener: 'data', token: readToken, body: { serviceId, environment: 'production', events } }), 202, 'track');
  const now = Date.now();
  const browser = [
    ...[0, 1, 2].map((i) => ({ type: 'pageview', siteId, url: 'https://shop.example/', timestamp: now, sessionId: `s${i}` })),
    ...[1200, 1800, 2500].map((value, i) => ({ type: 'webvital', siteId, url: 'https://shop.example/', timestamp: now, sessionId: `s${i}`, name: 'lcp', value })),
    ...[0.02, 0.08, 0.3].map((value, i) => ({ type: 'webvital', siteId, url: 'https://shop.example/', timestamp: now, sessionId: `s${i}`, name: 'cls', value })),
  ];
  expectStatus(await h.app.request('POST', '/e', { listener: 'ingest', body: browser }), 202, 'browser events');

  await eventually(async () => {
    const metrics = await owner.request('GET', `/api/flags/${flagKey}/metrics?serviceId=${serviceId}&environment=production&range=1h`);
    const names = await owner.request('GET', `/api/analytics/events/names?projectId=${projectId}`);
    const sites = await owner.request('GET', `/api/analytics/events?siteId=${siteId}`);
    return metrics.body?.summary?.totalEvaluations === USERS && names.body?.names?.length === 3 && sites.body?.events?.length === browser.length;
  }, 30_000);

  page = await h.newPage();
  await h.signIn(page, owner.cookie);
}, 90_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

const checkedWindow = () => page.getByRole('group', { name: 'Window' }).locator('input:checked').getAttribute('value');

describe('the flag metrics page', () => {
  it('opens on the last hour when all the data is in it, and says why', async () => {
    await page.goto(`/projects/${project.projectId}/flags/${flagKey}/metrics?serviceId=${project.serviceId}&environment=production`);
    const summary = page.getByRole('region', { name: 'Summary' });
    await summary.getByRole('definition').first().waitFor();
    expect(await checkedWindow()).toBe('1h');
    expect(await page.getByTestId('window-reason').textContent()).toMatch(/^Showing the last hour \(picked from the data: every evaluation of the last 30 days falls in it\)/);
    expect(await summary.getByRole('definition').first().textContent()).toBe(String(USERS));
    // The chart has the spike: some 1-minute point is above zero.
    await page.getByRole('button', { name: 'Show data table: Evaluations per second' }).click();
    const cells = await page.getByRole('table', { name: 'Evaluations per second' }).getByRole('cell').allTextContents();
    expect(cells.some((c) => /^[0-9.]+\/s$/.test(c) && c !== '0/s')).toBe(true);
    await page.getByRole('button', { name: 'Hide data table: Evaluations per second' }).click();
    await screenshot(page, 'analyst-defaults-flag-last-hour');
  });

  it("keeps the user's range", async () => {
    await page.goto(`/projects/${project.projectId}/flags/${flagKey}/metrics?serviceId=${project.serviceId}&environment=production&range=24h`);
    await page.getByTestId('window-reason').waitFor();
    expect(await checkedWindow()).toBe('24h');
    expect(await page.getByTestId('window-reason').textContent()).toBe('Showing the last 24 hours (your choice).');
  });

  it('shows conversion per variant with its 95% interval, as a table and a chart', async () => {
    const api = await project.owner.request(
      'GET',
      `/api/analytics/flags/${flagKey}/variants?projectId=${project.projectId}&serviceId=${project.serviceId}&environment=production&period=24h`,
    );
    expectStatus(api, 200, 'variants');
    const variants = api.body.variants as { variant: string; evaluations: number; conversions: number; conversionInterval: { low: number; high: number } | null }[];
    expect(variants.reduce((n, v) => n + v.conversions, 0)).toBe(OUTCOMES.signup + OUTCOMES.add_to_cart + OUTCOMES.purchase);
    const section = page.getByRole('region', { name: 'Conversion by variant' });
    const table = section.getByRole('table', { name: /^Conversion by variant/ });
    await table.getByRole('row').nth(1).waitFor();
    expect(await table.getByRole('row').count()).toBe(variants.length + 1);
    for (const v of variants) {
      const row = await table.getByRole('row', { name: new RegExp(`^${v.variant} `) }).textContent();
      expect(row).toContain(`${v.evaluations}${v.conversions}`);
      // Every variant here converted at most once per evaluation: the API gives an interval.
      expect(v.conversionInterval).not.toBeNull();
      expect(row).toMatch(/\d+(\.\d)?% – \d+(\.\d)?%$/);
    }
    const chart = section.getByRole('img', { name: /^Conversion rate per variant with 95% interval\. / });
    await chart.waitFor();
    expect(await chart.locator('.interval-whisker').count()).toBe(variants.length);
    // One conversion event only: the names the project reported are offered.
    await section.getByLabel('Conversion event').selectOption('purchase');
    const conversions = async () => {
      const cells = await table.locator('tbody tr td:nth-of-type(2)').allTextContents();
      return cells.reduce((n, c) => n + Number(c), 0);
    };
    await eventually(async () => (await conversions()) === OUTCOMES.purchase);
    await screenshot(page, 'analyst-defaults-flag-conversions');
  });

  it('says so when no outcome was attributed', async () => {
    const other = await project.owner.request('POST', '/api/flags', { serviceId: project.serviceId, environment: 'production', key: 'quiet-flag', type: 'boolean', defaultValue: false });
    expectStatus(other, 201, 'create quiet flag');
    await page.goto(`/projects/${project.projectId}/flags/quiet-flag/metrics?serviceId=${project.serviceId}&environment=production`);
    const section = page.getByRole('region', { name: 'Conversion by variant' });
    await section.getByRole('status').filter({ hasText: 'No outcome events attributed to this flag in this window' }).waitFor();
    // No evaluations: the window holds the flag's creation.
    expect(await checkedWindow()).toBe('1h');
    expect(await page.getByTestId('window-reason').textContent()).toMatch(/no evaluations in the last 30 days; the flag was created /);
  });
});

describe('the project metrics page', () => {
  it('opens on the last hour, the site with browser data, charts CLS and offers known event names as funnel steps', async () => {
    await page.goto(`/projects/${project.projectId}/metrics`);
    await page.getByRole('heading', { level: 1, name: 'Metrics' }).waitFor();
    await page.getByTestId('window-reason').waitFor();
    expect(await checkedWindow()).toBe('1h');

    const picker = page.getByLabel('Service (site)');
    await eventually(async () => (await picker.inputValue()) === siteId);
    expect(await picker.locator('option').allTextContents()).toEqual(expect.arrayContaining(['checkout (no browser data)', 'www storefront (9 browser events)']));

    const vitals = page.getByRole('region', { name: 'Visits and web vitals' });
    await vitals.getByRole('img', { name: /^Web vitals p75 over time\. From / }).waitFor();
    const cls = vitals.getByRole('img', { name: /^Cumulative layout shift \(CLS\) p75 over time\. From .*CLS p75: latest 0\.\d{3}, / });
    await cls.waitFor();
    await screenshot(page, 'analyst-defaults-project-vitals');

    // The funnel reads the flag's service: pick it, then the steps offer its event names.
    await picker.selectOption(project.serviceId);
    const funnel = page.getByRole('region', { name: 'Funnel by variant' });
    await funnel.getByLabel('Flag').selectOption(flagKey);
    const steps = funnel.getByRole('combobox', { name: 'Steps' });
    const listId = await steps.getAttribute('list');
    const options = page.locator(`datalist[id="${listId}"] option`);
    await eventually(async () => (await options.count()) === 3);
    expect(await options.evaluateAll((els) => els.map((e) => (e as unknown as { value: string }).value))).toEqual(['signup', 'add_to_cart', 'purchase']);
    await steps.fill('signup, ');
    await eventually(async () => (await options.first().getAttribute('value')) === 'signup, add_to_cart');
    expect(await options.count()).toBe(2);
    // Free text still goes.
    await steps.fill('signup, purchase');
    await funnel.getByRole('button', { name: 'Show funnel' }).click();
    await funnel.getByRole('table', { name: /^Funnel of fresh-spike/ }).getByRole('row', { name: /^2\. purchase / }).waitFor();
    await screenshot(page, 'analyst-defaults-project-funnel');
  });
});

describe('GET /api/analytics/events/names', () => {
  const path = (query: Record<string, string>) => `/api/analytics/events/names?${new URLSearchParams(query).toString()}`;

  it('lists the names the project reported, the most frequent first, to any reader', async () => {
    for (const user of [project.owner, project.viewer] as TestUser[]) {
      const res = await user.request('GET', path({ projectId: project.projectId }));
      expectStatus(res, 200, 'event names');
      expect(res.body).toEqual({ projectId: project.projectId, period: '30d', names: Object.entries(OUTCOMES).map(([name, count]) => ({ name, count })) });
    }
    const site = await project.owner.request('GET', path({ projectId: project.projectId, serviceId: siteId, period: '24h' }));
    expect(site.body.names).toEqual([]);
  });

  it('refuses bad parameters with the error envelope, and hides other projects', async () => {
    const bad: Record<string, string>[] = [{}, { projectId: '' }, { projectId: project.projectId, period: '90d' }, { projectId: project.projectId, serviceId: 'x'.repeat(300) }, { projectId: project.projectId, serviceId: '' }];
    for (const query of bad) {
      const res = await project.owner.request('GET', path(query));
      expect(res.status).toBe(400);
      expect(res.body).toEqual(expect.objectContaining({ error: 'Bad Request', message: expect.stringMatching(/^Validation failed: /) }));
    }
    const stranger = await h.app.signup({ verified: true });
    expect((await stranger.request('GET', path({ projectId: project.projectId }))).status).toBe(404);
    const elsewhere = await createProject(h.app);
    // A service of another project beside this project's id is not found either.
    expect((await project.owner.request('GET', path({ projectId: project.projectId, serviceId: elsewhere.serviceId }))).status).toBe(404);
    expect((await h.app.request('GET', path({ projectId: project.projectId }))).status).toBe(401);
  });
});
