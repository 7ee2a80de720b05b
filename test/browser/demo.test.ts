import type { Page, Response } from 'playwright-core';
import { screenshot, startConsole, type ConsoleHarness } from './support';

// page.evaluate bodies run in the browser; the tests' tsconfig has no DOM lib, so the few names they use are declared here.
interface PageButton {
  click(): void;
  getAttribute(name: string): string | null;
}
declare const document: {
  activeElement: PageButton | null;
  querySelector(selector: string): PageButton | null;
  documentElement: { scrollWidth: number; clientWidth: number };
};
declare function requestAnimationFrame(callback: () => void): number;
declare const performance: { now(): number };

// Two visitors, neither signed in. Both come from 127.0.0.1 (the server trusts no proxy here), so
// they share the demo's one-write-per-IP-per-2-s budget: the second visitor's quick write is the
// server's 429 path.
let h: ConsoleHarness;
let a: Page;
let b: Page;
const listStatuses: number[] = [];

const isDemoList = (response: Response) => new URL(response.url()).pathname === '/api/flags';
const pixel = (page: Page, index: number, state: 'on' | 'off') => page.getByRole('button', { name: `Pixel ${index}, ${state}`, exact: true });

async function openGrid(page: Page): Promise<void> {
  // The first read of a fresh server's grid can take a while on a busy machine.
  const listed = page.waitForResponse((r) => isDemoList(r) && r.status() === 200, { timeout: 30_000 });
  await page.goto('/demo');
  await page.getByRole('heading', { level: 1, name: 'Live demo grid' }).waitFor();
  await listed;
  await page.getByRole('status').filter({ hasText: /^Live$/ }).waitFor({ timeout: 30_000 });
}

beforeAll(async () => {
  h = await startConsole({ DEMO_SEED: 'true' });
  [a, b] = await Promise.all([h.newPage(), h.newPage()]);
  a.on('response', (r) => {
    if (isDemoList(r)) listStatuses.push(r.status());
  });
  await Promise.all([openGrid(a), openGrid(b)]);
}, 90_000);
afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

describe('the public demo grid', () => {
  it('shows 4,096 pixels as one tab stop, without signing in', async () => {
    const grid = a.getByRole('grid', { name: 'Demo pixels (production), 64 by 64' });
    expect(await grid.getByRole('row').count()).toBe(64);
    expect(await grid.getByRole('button').count()).toBe(4096);
    expect(await grid.locator('button[tabindex="0"]').count()).toBe(1);
    await screenshot(a, 'demo-grid');
  });

  it('toggles a pixel at once, another visitor sees it over the stream, and a quick second change is held back', async () => {
    const written = a.waitForResponse((r) => new URL(r.url()).pathname === '/api/flags/bulk');
    // Optimistic: shown before the server answers, by the next frame (well under 100 ms).
    const shown = await a.evaluate(async () => {
      const button = document.querySelector('button[aria-label="Pixel 12, off"]')!;
      const clicked = performance.now();
      button.click();
      await new Promise((resolve) => requestAnimationFrame(() => resolve(undefined)));
      return { label: button.getAttribute('aria-label'), ms: performance.now() - clicked };
    });
    expect(shown.label).toBe('Pixel 12, on');
    expect(shown.ms).toBeLessThan(100);
    expect((await written).status()).toBe(200);

    // Within 2 s of that write, at once: A clicks again, and B (same address) clicks too.
    const refused = b.waitForResponse((r) => new URL(r.url()).pathname === '/api/flags/bulk');
    await Promise.all([pixel(a, 13, 'off').click(), pixel(b, 14, 'off').click()]);
    // A first, while its 2 s last (the status line says Ready again after them): the page itself
    // says to wait, sends nothing, changes nothing.
    await a.getByText('Wait: one change every 2 seconds').waitFor();
    await a.getByText(/^Wait \d\.\d s: the demo takes one change every 2 seconds/).waitFor();
    await pixel(a, 13, 'off').waitFor();
    // B: the server refuses (429) and the pixel goes back.
    expect((await refused).status()).toBe(429);
    await b.getByText(/^Too quick: someone at your address changed a pixel/).waitFor();
    await pixel(b, 14, 'off').waitFor();

    // A's change reached B through the stream.
    await pixel(b, 12, 'on').waitFor({ timeout: 5_000 });
    await screenshot(b, 'demo-grid-cooldown');
  });

  it('moves through the grid with the arrow keys and toggles with Enter', async () => {
    await pixel(b, 12, 'on').focus();
    await b.keyboard.press('ArrowRight');
    await b.keyboard.press('ArrowDown');
    // 12 + 1 + 64: the focus moved, and the tab stop with it.
    await expect(b.evaluate(() => document.activeElement?.getAttribute('aria-label'))).resolves.toBe('Pixel 77, off');
    expect(await b.locator('button[tabindex="0"]').getAttribute('data-index')).toBe('77');
    // The 2 s since the refused write (the server counts from the accepted one) have passed by now, almost surely: wait them out.
    await b.waitForTimeout(2_000);
    await b.keyboard.press('Enter');
    await pixel(b, 77, 'on').waitFor({ timeout: 1_000 });
    await b.getByText('Pixel 77 turned on.').waitFor();
    await pixel(a, 77, 'on').waitFor({ timeout: 5_000 });
  });

  it('paints the grid kept from the last read on a reload and asks with its ETag whether it changed (304, no body)', async () => {
    // The grid changed since A's first read: this reload gets it whole (200) ...
    await a.reload();
    await a.getByRole('status').filter({ hasText: /^Live$/ }).waitFor();
    await pixel(a, 77, 'on').waitFor();
    // ... and with nothing changed since, the next one is a 304.
    listStatuses.length = 0;
    await a.reload();
    await a.getByRole('status').filter({ hasText: /^Live$/ }).waitFor();
    await pixel(a, 12, 'on').waitFor();
    await pixel(a, 77, 'on').waitFor();
    expect(listStatuses).toEqual([304]);
  });

  it('fits a narrow screen without sideways scrolling', async () => {
    await b.setViewportSize({ width: 360, height: 740 });
    const overflow = await b.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(b, 'demo-grid-narrow');
  });
});
