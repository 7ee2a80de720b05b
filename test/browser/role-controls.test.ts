import type { Locator, Page } from 'playwright-core';
import { eventually, type TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * Controls follow the signed-in user's role in the project (web/src/components/settings/access.ts):
 * a viewer sees creating flags and services, the flags' switches and the flag editor disabled
 * with the reason, instead of a "Forbidden" after the click; a member uses the same controls.
 * The project, its service and flag, and both users' roles come from the API.
 */

let h: ConsoleHarness;
let owner: TestUser;
let projectId: string;
let serviceId: string;
let viewerCookie: string;
let memberCookie: string;

const VIEWER_CREATE_FLAG = 'Viewers cannot create flags: that needs the member, admin or owner role in this project.';
const VIEWER_CREATE_SERVICE = 'Viewers cannot create services: that needs the member, admin or owner role in this project.';
const VIEWER_CHANGE_FLAG = 'Viewers cannot change flags: switching or editing one needs the member, admin or owner role in this project.';

beforeAll(async () => {
  h = await startConsole();
  owner = await h.app.signup({ verified: true, name: 'Role Owner' });
  projectId = (await owner.request('POST', '/api/projects', { name: 'Roles' })).body.id;
  serviceId = (await owner.request('POST', '/api/services', { projectId, name: 'Web' })).body.id;
  expect((await owner.request('POST', '/api/flags', { key: 'dark-mode', serviceId, name: 'Dark mode', type: 'boolean', defaultValue: false })).status).toBe(201);
  const viewer = await h.app.signup({ verified: true, name: 'Vera Viewer' });
  const member = await h.app.signup({ verified: true, name: 'Max Member' });
  expect((await owner.request('POST', `/api/projects/${projectId}/members`, { userId: viewer.id, role: 'viewer' })).status).toBe(201);
  expect((await owner.request('POST', `/api/projects/${projectId}/members`, { userId: member.id, role: 'member' })).status).toBe(201);
  viewerCookie = viewer.cookie;
  memberCookie = member.cookie;
}, 60_000);

afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

/** The text of the elements that describe a control (aria-describedby). */
async function description(page: Page, control: Locator): Promise<string> {
  const ids = (await control.getAttribute('aria-describedby'))?.split(' ') ?? [];
  const texts = await Promise.all(ids.map((id) => page.locator(`[id="${id}"]`).textContent()));
  return texts.join(' ').trim();
}

const flagPath = () => `/projects/${projectId}/flags/dark-mode?serviceId=${serviceId}&environment=development`;

it('shows a viewer the controls their role does not allow as disabled, with the reason', async () => {
  const page = await h.signedInPage(viewerCookie);
  await page.goto(`/projects/${projectId}`);
  await page.getByRole('heading', { level: 1, name: 'Roles' }).waitFor();
  const createService = page.getByRole('button', { name: 'Create service' });
  expect(await createService.isDisabled()).toBe(true);
  expect(await description(page, createService)).toBe(VIEWER_CREATE_SERVICE);
  expect(await page.getByLabel('Service name').count()).toBe(0);

  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Flags' }).click();
  await page.getByRole('link', { name: 'dark-mode' }).waitFor();
  expect(await page.getByRole('link', { name: 'Create flag' }).count()).toBe(0);
  const createFlag = page.getByRole('button', { name: 'Create flag' });
  expect(await createFlag.isDisabled()).toBe(true);
  expect(await description(page, createFlag)).toBe(VIEWER_CREATE_FLAG);
  const listSwitch = page.getByRole('switch', { name: 'Enabled: dark-mode' });
  expect(await listSwitch.isDisabled()).toBe(true);
  expect(await listSwitch.getAttribute('title')).toBe(VIEWER_CHANGE_FLAG);
  expect(await description(page, listSwitch)).toBe(VIEWER_CHANGE_FLAG);
  await screenshot(page, 'role-controls-viewer-flags');

  await page.getByRole('link', { name: 'dark-mode' }).click();
  await page.getByRole('heading', { level: 1, name: /Dark mode/ }).waitFor();
  const detailSwitch = page.getByRole('switch', { name: 'Enabled in development' });
  expect(await detailSwitch.isDisabled()).toBe(true);
  expect(await description(page, detailSwitch)).toBe(VIEWER_CHANGE_FLAG);
  // The editor is read-only: its fields and the rule editor are disabled, there is nothing to save.
  expect(await page.getByLabel('Name', { exact: true }).isDisabled()).toBe(true);
  expect(await page.getByRole('button', { name: 'Add rule' }).isDisabled()).toBe(true);
  expect(await page.getByRole('button', { name: 'Simulate and review changes' }).count()).toBe(0);
  expect(await description(page, page.getByRole('group').filter({ has: page.getByRole('heading', { name: 'Targeting rules' }) }))).toBe(VIEWER_CHANGE_FLAG);
  await screenshot(page, 'role-controls-viewer-flag');

  // The address of the create page says the same rather than offering a form that would fail.
  await page.goto(`/projects/${projectId}/flags/new`);
  await page.getByText(VIEWER_CREATE_FLAG).waitFor();
  expect(await page.getByLabel('Key').count()).toBe(0);
  // Nothing was changed.
  expect((await owner.request('GET', `/api/flags/dark-mode?serviceId=${serviceId}&environment=development`)).body.enabled).toBe(false);
  await page.close();
}, 60_000);

it('lets a member create a service, switch a flag and edit it', async () => {
  const page = await h.signedInPage(memberCookie);
  await page.goto(`/projects/${projectId}`);
  await page.getByRole('heading', { level: 1, name: 'Roles' }).waitFor();
  await page.getByLabel('Service name').fill('Mobile');
  await page.getByRole('button', { name: 'Create service' }).click();
  await page.getByRole('cell', { name: 'Mobile', exact: true }).waitFor();

  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Flags' }).click();
  await page.getByRole('link', { name: 'Create flag' }).waitFor();
  const listSwitch = page.getByRole('switch', { name: 'Enabled: dark-mode' });
  expect(await listSwitch.isDisabled()).toBe(false);
  expect(await listSwitch.getAttribute('aria-describedby')).toBeNull();
  await listSwitch.click();
  await eventually(async () => (await owner.request('GET', `/api/flags/dark-mode?serviceId=${serviceId}&environment=development`)).body.enabled === true);
  expect(await listSwitch.getAttribute('aria-checked')).toBe('true');

  await page.goto(flagPath());
  await page.getByRole('heading', { level: 1, name: /Dark mode/ }).waitFor();
  expect(await page.getByLabel('Name', { exact: true }).isDisabled()).toBe(false);
  expect(await page.getByRole('button', { name: 'Add rule' }).isDisabled()).toBe(false);
  expect(await page.getByText(VIEWER_CHANGE_FLAG).count()).toBe(0);
  await page.getByLabel('Name', { exact: true }).fill('Dark theme');
  await page.getByRole('button', { name: 'Simulate and review changes' }).click();
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('status').filter({ hasText: /Saved: version/ }).waitFor();
  await page.close();
}, 60_000);
