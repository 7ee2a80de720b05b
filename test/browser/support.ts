/**
 * Browser tests of the web console: a real server (the test harness's platform, with the
 * embedded profile's conveniences: the dev mailbox, cookies over plain http) serving the built
 * console from dist/web, driven by playwright-core with Debian's chromium. One browser per test
 * file; screenshots go to the test log directory as artifacts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';
import { projectPath } from '../../api/infra/paths';
import { eventually, startTestApp, type TestApp } from '../support/harness';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** scripts/test.sh sets TEST_LOG_DIR for the run; a direct jest run writes under /tmp. */
export const ARTIFACT_DIR = path.join(process.env.TEST_LOG_DIR ?? path.join('/tmp', 'flags-test-logs', 'browser'), 'screenshots');

export interface ConsoleHarness {
  app: TestApp;
  browser: Browser;
  /** The control plane's origin, where the console is served. */
  base: string;
  /** A fresh browser context (its own cookies) with one page; `options` add to the context's (a time zone). */
  newPage(options?: BrowserContextOptions): Promise<Page>;
  /** Signs the page's browser context in with a TestUser's session cookie (`name=value`). */
  signIn(page: Page, cookie: string): Promise<void>;
  /** A fresh browser context signed in with `cookie`, with one page. */
  signedInPage(cookie: string, options?: BrowserContextOptions): Promise<Page>;
  /** Uncaught page errors and Content-Security-Policy violations so far, in every page: should stay empty. */
  pageProblems: string[];
  stop(): Promise<void>;
}

/** The console must be built (npm run build; scripts/test.sh builds before jest). */
export function requireBuiltConsole(): void {
  if (!fs.existsSync(projectPath('dist', 'web', 'index.html'))) {
    throw new Error('The web console is not built: run `npm run build` (or `npm run build:web`) before the browser tests.');
  }
}

export async function startConsole(env: Record<string, string> = {}): Promise<ConsoleHarness> {
  requireBuiltConsole();
  if (!fs.existsSync(CHROMIUM_PATH)) throw new Error(`No chromium at ${CHROMIUM_PATH}: apt-get install -y chromium (scripts/test.sh installs it)`);
  const app = await startTestApp({ INSECURE_COOKIES: 'true', ...env });
  let browser: Browser | undefined;
  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-background-networking'],
    });
  } catch (error) {
    await app.stop();
    throw error;
  }
  const contexts: { close(): Promise<void> }[] = [];
  const pageProblems: string[] = [];
  const newPage = async (options: BrowserContextOptions = {}): Promise<Page> => {
    const context = await browser!.newContext({ baseURL: app.urls.control, viewport: { width: 1280, height: 800 }, ...options });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(10_000);
    page.on('pageerror', (error) => pageProblems.push(`uncaught: ${error.message}`));
    // Failed requests (the 401 of an anonymous /api/users/me) are expected; policy violations never.
    page.on('console', (message) => {
      if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) pageProblems.push(message.text());
    });
    return page;
  };
  const signIn = async (page: Page, cookie: string): Promise<void> => {
    const [name, value] = cookie.split(/=(.*)/s);
    await page.context().addCookies([{ name: name!, value: value ?? '', url: app.urls.control }]);
  };
  return {
    app,
    browser,
    base: app.urls.control,
    pageProblems,
    newPage,
    signIn,
    async signedInPage(cookie, options) {
      const page = await newPage(options);
      await signIn(page, cookie);
      return page;
    },
    async stop() {
      await Promise.all(contexts.map((c) => c.close().catch(() => undefined)));
      await browser!.close().catch(() => undefined);
      await app.stop();
    },
  };
}

/** Saves a full-page screenshot as a test artifact; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  fs.mkdirSync(ARTIFACT_DIR, { recursive: true });
  const file = path.join(ARTIFACT_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** The newest mail to an address whose text has `pathname` (mail goes out through a workflow: polled). */
export async function mailLink(app: TestApp, email: string, pathname: string): Promise<string> {
  return eventually(async () => {
    const res = await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(email)}`);
    const mail = (res.body?.messages as { text: string }[] | undefined)?.find((m) => m.text.includes(pathname));
    return mail ? linkIn(mail.text, pathname) : undefined;
  });
}

/** The path and query of the first link to `pathname` in a mail (the mail names PUBLIC_BASE_URL, not the test port). */
export function linkIn(body: string, pathname: string): string {
  const match = new RegExp(`https?://[^\\s/]+(${pathname.replace(/[/?]/g, '\\$&')}\\?[^\\s]+)`).exec(body);
  if (!match) throw new Error(`no ${pathname} link in: ${body}`);
  return match[1];
}
