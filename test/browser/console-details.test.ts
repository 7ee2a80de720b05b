import type { Page } from 'playwright-core';
import type { TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * Details of the console that only a real browser shows: where focus is drawn, how flag keys
 * lay out in a table.
 */

// page.evaluate bodies run in the browser; the tests' tsconfig has no DOM lib.
declare const document: { activeElement: { tagName: string } | null; getElementById(id: string): unknown };
declare function getComputedStyle(element: unknown): { outlineStyle: string; outlineWidth: string; boxShadow: string };

let h: ConsoleHarness;
let page: Page;
let owner: TestUser;
let projectId: string;
let serviceId: string;
const LONG_KEY = 'checkout-new-payment-flow-v2';

beforeAll(async () => {
  h = await startConsole();
  owner = await h.app.signup({ verified: true, name: 'Detail Owner' });
  projectId = (await owner.request('POST', '/api/projects', { name: 'Detail Shop' })).body.id;
  serviceId = (await owner.request('POST', '/api/services', { projectId, name: 'Storefront' })).body.id;
  const flag = await owner.request('POST', '/api/flags', {
    key: LONG_KEY,
    serviceId,
    name: 'The new payment flow of the checkout, second version, with saved cards and wallets',
    type: 'boolean',
    defaultValue: false,
    tags: ['checkout', 'payments', 'experiment'],
  });
  expect(flag.status).toBe(201);
  page = await h.newPage();
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  // No uncaught error and no Content-Security-Policy violation on any page the tests opened.
  expect(problems).toEqual([]);
});

const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });

/** Whether an element draws a focus indicator: an outline or the ring's box-shadow. */
async function focusDrawn(selector: string): Promise<{ outline: boolean; shadow: boolean }> {
  return page.locator(selector).evaluate((element) => {
    const style = getComputedStyle(element);
    return { outline: style.outlineStyle !== 'none' && style.outlineWidth !== '0px', shadow: style.boxShadow !== 'none' };
  });
}

describe('console details in a real browser', () => {
  it('draws no frame around main when the redirect to sign-in focuses it, but still rings a control focused from the keyboard', async () => {
    await page.goto(`/projects/${projectId}/flags`);
    await heading('Sign in').waitFor();
    // The shell moved focus to main (for screen readers) after the redirect.
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('MAIN');
    expect(await focusDrawn('main')).toEqual({ outline: false, shadow: false });
    await screenshot(page, 'details-signin-focus');

    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('INPUT');
    expect(await focusDrawn('main input[name="email"]')).toEqual({ outline: true, shadow: true });
  });

  it('keeps a long flag key on one line in the flags list at 1280 px', async () => {
    const [name, value] = owner.cookie.split('=');
    await page.context().addCookies([{ name, value, url: h.base }]);
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`/projects/${projectId}/flags`);
    await heading('Flags').waitFor();
    const key = page.getByRole('link', { name: LONG_KEY });
    await key.waitFor();
    // An inline box broken over lines has one client rect per line.
    const lines = await key.locator('code').evaluate((code) => (code as unknown as { getClientRects(): { length: number } }).getClientRects().length);
    expect(lines).toBe(1);
    await screenshot(page, 'details-long-flag-key');
  });
});
