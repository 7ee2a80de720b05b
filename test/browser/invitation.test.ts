import type { Page } from 'playwright-core';
import { mailLink, screenshot, startConsole, type ConsoleHarness } from './support';

// page.evaluate bodies run in the browser; the tests' tsconfig has no DOM lib, so the few names they use are declared here.
interface PageElement {
  id: string;
  textContent: string | null;
}
declare const document: {
  activeElement: PageElement | null;
  querySelector(selector: string): PageElement | null;
  documentElement: { scrollWidth: number; clientWidth: number };
};
declare function getComputedStyle(element: PageElement): { outlineStyle: string };

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

describe('an invitation accepted in the console', () => {
  const invitee = `invitee-${Date.now()}@example.com`;
  const password = 'another long password';
  let projectId: string;

  beforeAll(async () => {
    const owner = await h.app.signup({ verified: true });
    const project = await owner.request('POST', '/api/projects', { name: 'Invited Shop' });
    projectId = project.body.id;
    const invitation = await owner.request('POST', `/api/projects/${projectId}/invitations`, { email: invitee, role: 'member' });
    expect(invitation.status).toBe(201);
  });

  it('sends a signed-out visitor of the mailed link to create an account and back', async () => {
    await page.goto(await mailLink(h.app, invitee, '/invitations/accept'));
    await heading('Accept an invitation').waitFor();
    await page.getByRole('link', { name: 'create an account' }).click();
    await page.getByLabel('Name').fill('Invited Person');
    await page.getByLabel('E-mail').fill(invitee);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await heading('Accept an invitation').waitFor();
    await page.getByText(`You are signed in as ${invitee}`).waitFor();
  });

  it('shows why accepting fails before the address is verified, and accepts after', async () => {
    await page.getByRole('button', { name: 'Accept invitation' }).click();
    await page.getByRole('alert').filter({ hasText: /verif/i }).waitFor();
    await screenshot(page, 'accept-invitation-error');
    const back = page.url();
    await page.goto(await mailLink(h.app, invitee, '/verify-email'));
    await page.getByText('Your e-mail address is verified').waitFor();
    await page.goto(back);
    await page.getByRole('button', { name: 'Accept invitation' }).click();
    await page.getByText('You joined Invited Shop').waitFor();
    await screenshot(page, 'accept-invitation');
    await page.getByRole('link', { name: 'Open the project' }).click();
    await heading('Invited Shop').waitFor();
    expect(new URL(page.url()).pathname).toBe(`/projects/${projectId}`);
  });

  it('works from the keyboard alone: skip link first, visible focus, sign in with Tab and Enter', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await heading('Sign in').waitFor();
    await page.goto('/signin');
    await heading('Sign in').waitFor();
    const focused = () => page.evaluate(() => {
      const el = document.activeElement;
      const label = el?.id ? document.querySelector(`label[for="${el.id}"]`)?.textContent : undefined;
      return { name: label ?? el?.textContent ?? '', outline: el ? getComputedStyle(el).outlineStyle : '' };
    });
    await page.keyboard.press('Tab');
    expect(await focused()).toEqual({ name: 'Skip to content', outline: 'solid' });
    for (let i = 0; i < 5 && (await focused()).name !== 'E-mail'; i++) await page.keyboard.press('Tab');
    expect(await focused()).toEqual({ name: 'E-mail', outline: 'solid' });
    await page.keyboard.type(invitee);
    await page.keyboard.press('Tab');
    expect((await focused()).name).toBe('Password');
    await page.keyboard.type(password);
    await page.keyboard.press('Enter');
    await heading(/^Projects/).waitFor();
    // Focus moved to the new page, not left on a control of the old one.
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('main');
  });

  it('stacks the layout on a narrow screen', async () => {
    await page.setViewportSize({ width: 390, height: 800 });
    // The project is in an organization the invitee does not belong to: listed as shared.
    expect(await page.getByRole('combobox', { name: 'Organization' }).locator('option:checked').textContent()).toBe('Shared with you');
    await page.getByRole('link', { name: 'Invited Shop' }).click();
    await heading('Invited Shop').waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(page, 'project-home-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
  });
});
