import type { Page } from 'playwright-core';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * A page whose file fails to load (its hashed chunk gone after an upgrade, a dropped connection)
 * says so in its own area with Retry, while the header and navigation stay usable
 * (web/src/page-boundary.tsx); Retry loads the page again once the file can be fetched.
 */

let h: ConsoleHarness;
let page: Page;
let projectId: string;

beforeAll(async () => {
  h = await startConsole();
  const owner = await h.app.signup({ verified: true, name: 'Chunk Owner' });
  projectId = (await owner.request('POST', '/api/projects', { name: 'Chunky' })).body.id;
  page = await h.newPage();
  await h.signIn(page, owner.cookie);
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  // The failed import is caught by the boundary: nothing uncaught, no policy violation.
  expect(problems).toEqual([]);
});

// The flags list page's chunk (web/src/pages/flags/list.tsx, built as assets/list-<hash>.js).
const FLAGS_CHUNK = /\/assets\/list-[\w-]+\.js$/;

it('keeps the shell when a page fails to load, and Retry loads it', async () => {
  await page.goto(`/projects/${projectId}`);
  await page.getByRole('heading', { level: 1, name: 'Chunky' }).waitFor();

  let aborted = 0;
  await page.route(FLAGS_CHUNK, async (route) => {
    aborted += 1;
    await route.abort('connectionfailed');
  });
  const nav = page.getByRole('navigation', { name: 'Console' });
  await nav.getByRole('link', { name: 'Flags' }).click();

  await page.getByRole('heading', { level: 1, name: 'This page could not load' }).waitFor();
  // The import, and Vite's modulepreload of the same chunk when the page's graph carries CSS.
  expect(aborted).toBeGreaterThanOrEqual(1);
  await page.getByRole('alert').filter({ hasText: 'This page could not load' }).waitFor();
  // The shell is still there and works: the header's switchers and user, the navigation.
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  expect(await page.getByLabel('Project').inputValue()).toBe(projectId);
  await nav.getByRole('link', { name: 'Overview' }).waitFor();
  await page.getByRole('button', { name: 'Reload the console' }).waitFor();
  await screenshot(page, 'page-boundary-failed');

  await page.unroute(FLAGS_CHUNK);
  await page.getByRole('button', { name: 'Retry' }).click();
  await page.getByRole('heading', { level: 1, name: 'Flags' }).waitFor();
  await page.getByRole('link', { name: 'Create flag' }).waitFor();
  expect(await page.getByText('This page could not load').count()).toBe(0);

  // The navigation worked all along: away and back, the page (loaded now) shows at once.
  await nav.getByRole('link', { name: 'Overview' }).click();
  await page.getByRole('heading', { level: 1, name: 'Chunky' }).waitFor();
  await nav.getByRole('link', { name: 'Flags' }).click();
  await page.getByRole('heading', { level: 1, name: 'Flags' }).waitFor();
}, 60_000);
