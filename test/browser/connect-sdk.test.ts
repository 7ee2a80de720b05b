import type { Locator, Page } from 'playwright-core';
import { createProject, type Project } from '../webhooks/support';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * The "Connect an SDK" page of a service (web/src/pages/services/connect.tsx): its ids, this
 * deployment's endpoints (GET /api/projects/{id}/sdk-endpoints, docs/api-reference.md#sdk-endpoints),
 * a read token bound to the service and an environment, shown once and filled into the snippets;
 * the Node OFREP snippet's values evaluate the service's flag for real.
 */

let h: ConsoleHarness;
let p: Project;
const FLAG_KEY = 'new-checkout';
const SETTINGS_REFUSAL = 'Managing API tokens and webhooks needs the owner or admin role in this project.';

beforeAll(async () => {
  h = await startConsole();
  p = await createProject(h.app);
  const flag = await p.owner.request('POST', '/api/flags', { key: FLAG_KEY, name: 'New checkout', type: 'string', serviceId: p.serviceId, defaultValue: 'variant-b' });
  expect(flag.status).toBe(201);
}, 90_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

async function description(page: Page, control: Locator): Promise<string> {
  const ids = (await control.getAttribute('aria-describedby'))?.split(' ') ?? [];
  const texts = await Promise.all(ids.map((id) => page.locator(`[id="${id}"]`).textContent()));
  return texts.join(' ').trim();
}

const nodeOfrepSnippet = (page: Page) => page.locator('pre[data-snippet="ofrep-node"]');

it('opens from the project home, shows the ids, and a bound token shown once works in the Node OFREP snippet', async () => {
  const page = await h.signedInPage(p.owner.cookie);
  await page.goto(`/projects/${p.projectId}`);
  const connect = page.getByRole('link', { name: 'Connect an SDK to checkout' });
  await connect.waitFor();
  await screenshot(page, 'connect-sdk-project-home-link');
  await connect.click();
  await page.getByRole('heading', { level: 1, name: 'Connect an SDK to checkout' }).waitFor();
  const ids = page.getByRole('region', { name: 'Identifiers' });
  await ids.getByText(p.projectId, { exact: true }).waitFor();
  await ids.getByText(p.serviceId, { exact: true }).waitFor();
  for (const environment of ['development', 'staging', 'production']) await ids.getByText(environment, { exact: true }).waitFor();
  expect(await page.getByRole('button', { name: 'Copy service id' }).count()).toBe(1);
  // Before a token: a placeholder, and the service's own flag in the example.
  await page.getByRole('tab', { name: 'Node' }).waitFor();
  await expectText(nodeOfrepSnippet(page), '<bound token>');
  await expectText(nodeOfrepSnippet(page), `'${FLAG_KEY}'`);

  await page.getByLabel('Environment', { exact: true }).selectOption('staging');
  await page.getByRole('button', { name: 'Create token' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByText('Copy it now: it will not be shown again.').waitFor();
  const token = await dialog.getByLabel('Token', { exact: true }).inputValue();
  expect(token).toMatch(/\S{20,}/);
  await dialog.getByRole('button', { name: 'I have copied it' }).click();
  await dialog.waitFor({ state: 'hidden' });
  await expectText(nodeOfrepSnippet(page), token);
  await screenshot(page, 'connect-sdk-owner-token-in-snippets');

  // The token is bound to this service and staging, with read only.
  const listed = await p.owner.request('GET', `/api/projects/${p.projectId}/tokens`);
  const record = listed.body.tokens.find((t: { name: string }) => t.name === 'checkout SDK');
  expect(record.scope).toEqual({ serviceId: p.serviceId, environment: 'staging' });

  // What the snippet says is what works: its base URL, token and flag key evaluate the flag over OFREP.
  const code = (await nodeOfrepSnippet(page).textContent()) ?? '';
  const baseUrl = /baseUrl: '([^']+)'/.exec(code)?.[1];
  const bearer = /\['Authorization', 'Bearer ([^']+)'\]/.exec(code)?.[1];
  const flagKey = /get\w+Value\('([^']+)'/.exec(code)?.[1];
  expect({ bearer, flagKey }).toEqual({ bearer: token, flagKey: FLAG_KEY });
  const res = await fetch(`${baseUrl}/ofrep/v1/evaluate/flags/${flagKey}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    body: JSON.stringify({ context: { targetingKey: 'user-123' } }),
  });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { value: unknown }).value).toBe('variant-b');

  // Shown once: a new visit shows the placeholder again.
  await page.reload();
  await expectText(nodeOfrepSnippet(page), '<bound token>');
  expect(await nodeOfrepSnippet(page).textContent()).not.toContain(token);
}, 90_000);

it('shows the flagd snippets with the deployment flagd ports, per language tab', async () => {
  const page = await h.signedInPage(p.owner.cookie);
  await page.goto(`/projects/${p.projectId}/services/${p.serviceId}/connect`);
  const endpoints = (await p.owner.request('GET', `/api/projects/${p.projectId}/sdk-endpoints`)).body;
  expect(endpoints.flagd.syncPort).toBe(Number(new URL(h.app.urls.flagdSync!).port));
  await page.getByRole('tab', { name: 'Python' }).click();
  await expectText(page.locator('pre[data-snippet="flagd-python"]'), `port=${endpoints.flagd.syncPort}`);
  await expectText(page.locator('pre[data-snippet="ofrep-python"]'), `base_url="${endpoints.ofrepBaseUrl}"`);
  await page.getByRole('tab', { name: 'Browser' }).click();
  await expectText(page.locator('pre[data-snippet="ofrep-browser"]'), '@openfeature/ofrep-web-provider');
  await screenshot(page, 'connect-sdk-browser-tab');
}, 60_000);

it('shows a viewer token creation disabled, with the reason', async () => {
  const page = await h.signedInPage(p.viewer.cookie);
  await page.goto(`/projects/${p.projectId}/services/${p.serviceId}/connect`);
  await page.getByRole('heading', { level: 1, name: 'Connect an SDK to checkout' }).waitFor();
  const create = page.getByRole('button', { name: 'Create token' });
  expect(await create.isDisabled()).toBe(true);
  expect(await description(page, create)).toBe(SETTINGS_REFUSAL);
  expect(await page.getByLabel('Token name').count()).toBe(0);
  await expectText(nodeOfrepSnippet(page), '<bound token>');
  await screenshot(page, 'connect-sdk-viewer-refused');
}, 60_000);

describe('GET /api/projects/{id}/sdk-endpoints', () => {
  it('answers the listeners this deployment serves, to any member of the project', async () => {
    for (const user of [p.owner, p.viewer]) {
      const res = await user.request('GET', `/api/projects/${p.projectId}/sdk-endpoints`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        dataUrl: h.app.urls.data,
        ofrepBaseUrl: `${h.app.urls.data}/api`,
        ingestUrl: h.app.urls.ingest,
        flagd: { host: '127.0.0.1', evaluationPort: Number(new URL(h.app.urls.flagd!).port), syncPort: Number(new URL(h.app.urls.flagdSync!).port), tls: false },
      });
    }
  });

  it('refuses an oversize id with 400 in the error envelope', async () => {
    const res = await p.owner.request('GET', `/api/projects/${'p'.repeat(129)}/sdk-endpoints`);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('Bad Request');
    expect(res.body.details.map((d: { path: string }) => d.path)).toContain('params.id');
  });

  it('answers 404 to another project, 401 without credentials and 403 to a bound token', async () => {
    const stranger = await h.app.signup({ verified: true });
    expect((await stranger.request('GET', `/api/projects/${p.projectId}/sdk-endpoints`)).status).toBe(404);
    expect((await h.app.request('GET', `/api/projects/${p.projectId}/sdk-endpoints`)).status).toBe(401);
    const bound = await p.owner.request('POST', `/api/projects/${p.projectId}/tokens`, { name: 'bound', permissions: { read: true }, scope: { serviceId: p.serviceId, environment: 'production' } });
    expect(bound.status).toBe(201);
    expect((await h.app.request('GET', `/api/projects/${p.projectId}/sdk-endpoints`, { token: bound.body.value })).status).toBe(403);
  });
});

async function expectText(locator: Locator, text: string): Promise<void> {
  await locator.filter({ hasText: text }).waitFor();
}
