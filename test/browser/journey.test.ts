import type { Page } from 'playwright-core';
import { mailLink, screenshot, startConsole, type ConsoleHarness } from './support';

let h: ConsoleHarness;
let page: Page;
beforeAll(async () => {
  h = await startConsole();
  page = await h.newPage();
}, 60_000);
afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  // No uncaught error and no Content-Security-Policy violation on any page the tests opened.
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });

describe('the first journey in the console', () => {
  const email = `journey-${Date.now()}@example.com`;
  const password = 'correct horse battery staple';

  it('signs up from the start page and lands on the projects page', async () => {
    await page.goto('/');
    await heading('Sign in').waitFor();
    await screenshot(page, 'sign-in');
    await page.getByRole('link', { name: 'Create an account' }).click();
    await heading('Create an account').waitFor();
    await page.getByLabel('Name').fill('Journey Tester');
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill('short');
    await page.getByRole('button', { name: 'Create account' }).click();
    // The API's validation message shows beside the field.
    await page.getByText('must be at least 10 characters', { exact: true }).waitFor();
    expect(await page.getByLabel('Password').getAttribute('aria-invalid')).toBe('true');
    await screenshot(page, 'sign-up-error');
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await heading(/^Projects/).waitFor();
    expect(new URL(page.url()).pathname).toBe('/projects');
    await page.getByRole('region', { name: 'E-mail verification' }).waitFor();
  });

  it('verifies the e-mail address through the mailed /verify-email link', async () => {
    const link = await mailLink(h.app, email, '/verify-email');
    await page.goto(link);
    await page.getByText('Your e-mail address is verified').waitFor();
    await screenshot(page, 'verify-email');
    await page.getByRole('link', { name: 'Continue to the console' }).click();
    await heading(/^Projects/).waitFor();
    await page.getByRole('region', { name: 'E-mail verification' }).waitFor({ state: 'detached' });
  });

  it('creates a project, then a service in it', async () => {
    await page.getByLabel('Project name').fill('Journey Shop');
    await page.getByRole('button', { name: 'Create project' }).click();
    await heading('Journey Shop').waitFor();
    expect(page.url()).toMatch(/\/projects\/[^/]+$/);
    // The header's switchers follow the project.
    expect(await page.getByRole('combobox', { name: 'Project' }).locator('option:checked').textContent()).toBe('Journey Shop');
    await page.getByLabel('Service name').fill('Checkout API');
    await page.getByRole('button', { name: 'Create service' }).click();
    await page.getByRole('cell', { name: 'Checkout API', exact: true }).waitFor();
    await screenshot(page, 'project-home');
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Projects' }).click();
    await page.getByRole('link', { name: 'Journey Shop' }).waitFor();
    await screenshot(page, 'projects');
  });

  it("reports the console's screens to /ingest/admin-events", async () => {
    // Batches leave within 5 s of their first event.
    const sent = page.waitForResponse((res) => new URL(res.url()).pathname === '/ingest/admin-events', { timeout: 10_000 });
    const answer = await sent;
    expect(answer.status()).toBe(202);
    const body = (await answer.json()) as { accepted: number; errors: unknown[] };
    expect(body.errors).toEqual([]);
    expect(body.accepted).toBeGreaterThan(0);
    const events = JSON.parse(answer.request().postData() ?? '[]') as { event: string; properties: { screen?: string } }[];
    expect(events.map((e) => e.event)).toContain('screen_viewed');
    expect(events.map((e) => e.properties.screen)).toContain('projects');
  });

  it('signs out, is sent to sign in from a signed-in page, and signs in again', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await heading('Sign in').waitFor();
    await page.goto('/projects');
    await heading('Sign in').waitFor();
    expect(new URL(page.url()).searchParams.get('next')).toBe('/projects');
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill('wrong password here');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: /./ }).waitFor();
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await heading(/^Projects/).waitFor();
    await page.getByRole('link', { name: 'Journey Shop' }).waitFor();
  });

  it('sends the user to sign in when the session ends elsewhere (a 401), and back afterwards', async () => {
    const cookie = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const csrf = (await h.app.request('GET', '/api/csrf-token', { cookie })).body.token as string;
    expect((await h.app.request('POST', '/api/auth/logout', { cookie, csrf })).status).toBe(204);
    await page.getByRole('link', { name: 'Journey Shop' }).click();
    await heading('Sign in').waitFor();
    const next = new URL(page.url()).searchParams.get('next');
    expect(next).toMatch(/^\/projects\/[^/]+$/);
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await heading('Journey Shop').waitFor();
    expect(new URL(page.url()).pathname).toBe(next);
  });
});
