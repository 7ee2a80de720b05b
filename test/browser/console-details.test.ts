import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { eventually, type TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * Details of the console that only a real browser shows: where focus is drawn, how flag keys
 * lay out in a table, whether a webhook's endpoint takes its deliveries, a flag's way to its triggers.
 */

// page.evaluate bodies run in the browser; the tests' tsconfig has no DOM lib.
declare const document: { activeElement: { tagName: string } | null; getElementById(id: string): unknown };
declare function getComputedStyle(element: unknown): { outlineStyle: string; outlineWidth: string; boxShadow: string };

let h: ConsoleHarness;
let page: Page;
let owner: TestUser;
let projectId: string;
let serviceId: string;
/** A local webhook endpoint (the test profile allows 127.0.0.1 targets): /broken answers 500, the rest 200. */
let receiver: http.Server;
let receiverUrl: string;
const LONG_KEY = 'checkout-new-payment-flow-v2';

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(req.url === '/broken' ? 500 : 200).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
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
  // Listed before the long key whichever way the flags are ordered (by key, or newest first).
  expect((await owner.request('POST', '/api/flags', { key: 'a-banner', serviceId, name: 'A banner', type: 'boolean', defaultValue: false })).status).toBe(201);
  page = await h.newPage();
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  await new Promise((resolve) => receiver?.close(resolve));
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
    await h.signIn(page, owner.cookie);
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

  it("says a webhook whose endpoint fails every delivery is failing, not just active", async () => {
    for (const path of ['/broken', '/fine']) {
      expect((await owner.request('POST', '/api/webhooks', { projectId, url: `${receiverUrl}${path}` })).status).toBe(201);
    }
    for (const enabled of [true, false]) {
      const toggled = await owner.request('POST', `/api/flags/${LONG_KEY}/toggle?serviceId=${serviceId}&environment=development`, { enabled });
      expect(toggled.status).toBe(200);
    }
    await page.goto(`/projects/${projectId}/settings/webhooks`);
    await heading('Webhooks').waitFor();
    const broken = page.getByRole('row', { name: new RegExp(`${receiverUrl}/broken`) });
    const fine = page.getByRole('row', { name: new RegExp(`${receiverUrl}/fine`) });
    // Deliveries go out through a workflow: the page is reloaded until both were tried.
    await eventually(async () => {
      await page.reload();
      await broken.waitFor();
      return (await broken.getByRole('cell', { name: 'Failing: last 2 deliveries failed (HTTP 500)' }).count()) === 1 && (await fine.getByRole('cell', { name: 'Healthy' }).count()) === 1;
    }, 30_000, 500);
    await broken.getByRole('cell', { name: 'Active', exact: true }).waitFor();
    await screenshot(page, 'details-webhook-health');

    await broken.getByRole('link', { name: `Deliveries and settings of ${receiverUrl}/broken` }).click();
    await page.getByRole('heading', { name: 'Delivery log' }).waitFor();
    await page.getByText('Health: Failing: last 2 deliveries failed (HTTP 500)').waitFor();
  });

  it("links a flag's page to that flag's triggers, and lists the service's triggers across its flags", async () => {
    for (const [key, name] of [[LONG_KEY, 'Payments kill switch'], ['a-banner', 'Banner off']]) {
      expect((await owner.request('POST', `/api/flags/${key}/triggers`, { serviceId, environment: 'production', action: 'disable', name })).status).toBe(201);
    }
    await page.goto(`/projects/${projectId}/flags/${LONG_KEY}?serviceId=${serviceId}&environment=production`);
    await page.getByRole('navigation', { name: 'More about this flag' }).getByRole('link', { name: 'Triggers' }).click();
    await heading('Triggers').waitFor();
    await page.getByRole('heading', { name: `Triggers of ${LONG_KEY}` }).waitFor();
    expect(await page.getByRole('combobox', { name: 'Flag' }).inputValue()).toBe(LONG_KEY);
    const ofFlag = page.getByRole('table', { name: /^Active triggers of this flag/ });
    await ofFlag.getByRole('row', { name: /Payments kill switch/ }).getByRole('cell', { name: 'disable', exact: true }).waitFor();
    expect(await ofFlag.getByRole('row', { name: /Banner off/ }).count()).toBe(0);
    // Every flag's triggers, by flag key, above the chosen flag's.
    const all = page.getByRole('table', { name: /^Active triggers of every flag/ });
    await page.getByRole('heading', { name: 'All triggers of Storefront' }).waitFor();
    await all.getByRole('row', { name: /Payments kill switch/ }).getByRole('link', { name: LONG_KEY }).waitFor();
    expect(await all.getByRole('row').allInnerTexts()).toEqual([expect.stringMatching(/^Flag/), expect.stringMatching(/^a-banner\s+Banner off/), expect.stringMatching(new RegExp(`^${LONG_KEY}\\s+Payments kill switch`))]);
    // The choice is in the address: a reload keeps it.
    await page.reload();
    await page.getByRole('heading', { name: `Triggers of ${LONG_KEY}` }).waitFor();
    await screenshot(page, 'details-flag-triggers');

    // A flag in the overview opens its own triggers.
    await all.getByRole('link', { name: 'a-banner' }).click();
    await page.getByRole('heading', { name: 'Triggers of a-banner' }).waitFor();
    expect(await page.getByRole('combobox', { name: 'Flag' }).inputValue()).toBe('a-banner');
    await ofFlag.getByRole('row', { name: /Banner off/ }).waitFor();
  });
});
