import type { Page } from 'playwright-core';
import type { TestUser } from '../support/harness';
import { screenshot, startConsole, type ConsoleHarness } from './support';

/**
 * Change requests in the console, with three people of one project in their own browsers: the
 * owner protects production in the project's settings (one approval, by an owner or admin); a
 * member (the author, in Berlin) saves a production change, is refused, and opens a change
 * request from the flag editor instead; the owner (the approver) finds it in the inbox, reads its
 * diff and impact, approves it with a comment and applies it, and the flag serves the new value
 * (checked through the API). Another member, whose role cannot approve, sees why. A second
 * request, opened from the on/off switch with a schedule, is rejected and changes nothing; a
 * third fails to apply because its flag moved since; a fourth is cancelled.
 */

let h: ConsoleHarness;
let owner: TestUser;
let author: TestUser;
let bystander: TestUser;
let approverPage: Page;
let authorPage: Page;
let bystanderPage: Page;
let projectId: string;
let serviceId: string;
let sdkToken: string;
const flagKey = 'new-checkout';
const darkKey = 'dark-mode';
const searchKey = 'search-v2';
const flagPath = (key: string) => `/api/flags/${key}?serviceId=${serviceId}&environment=production`;
const flagHref = (key: string) => `/projects/${projectId}/flags/${key}?serviceId=${serviceId}&environment=production`;
let requestHref: string;

async function signedIn(user: TestUser, options: { timezoneId?: string } = {}): Promise<Page> {
  const page = await h.newPage(options);
  // Signed in with the API's session cookie: the sign-in form is the journey test's subject.
  await h.signIn(page, user.cookie);
  return page;
}

async function evaluate(key: string, targetingKey: string): Promise<unknown> {
  const res = await h.app.request('POST', '/api/flags/evaluate', { listener: 'data', token: sdkToken, body: { flagKey: key, serviceId, environment: 'production', context: { targetingKey } } });
  expect(res.status).toBe(200);
  return res.body.value;
}

beforeAll(async () => {
  h = await startConsole({ EVAL_EVENTS_FLUSH_MS: '300' });
  owner = await h.app.signup({ verified: true, name: 'Olga Owner' });
  author = await h.app.signup({ verified: true, name: 'Arne Author' });
  bystander = await h.app.signup({ verified: true, name: 'Mia Member' });
  projectId = (await owner.request('POST', '/api/projects', { name: 'Approval Shop' })).body.id;
  for (const user of [author, bystander]) expect((await owner.request('POST', `/api/projects/${projectId}/members`, { userId: user.id, role: 'member' })).status).toBe(201);
  serviceId = (await owner.request('POST', '/api/services', { projectId, name: 'Checkout API' })).body.id;
  expect((await owner.request('POST', '/api/flags', { key: flagKey, name: 'New checkout', type: 'boolean', serviceId, environment: 'production', enabled: true, defaultValue: false })).status).toBe(201);
  expect((await owner.request('POST', '/api/flags', { key: darkKey, name: 'Dark mode', type: 'boolean', serviceId, environment: 'production', enabled: false, defaultValue: true })).status).toBe(201);
  expect((await owner.request('POST', '/api/flags', { key: searchKey, name: 'Search v2', type: 'boolean', serviceId, environment: 'production', enabled: true, defaultValue: false })).status).toBe(201);
  sdkToken = (await owner.request('POST', `/api/projects/${projectId}/tokens`, { name: 'sdk', permissions: { read: true } })).body.value as string;
  // Real contexts for the request's impact (a replay over recent contexts).
  for (let i = 0; i < 5; i++) expect(await evaluate(flagKey, `user-${i}`)).toBe(false);
  [approverPage, authorPage, bystanderPage] = await Promise.all([signedIn(owner), signedIn(author, { timezoneId: 'Europe/Berlin' }), signedIn(bystander)]);
}, 60_000);
afterAll(async () => {
  const problems = h?.pageProblems ?? [];
  await h?.stop();
  expect(problems).toEqual([]);
});

const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { level: 1, name });

describe('change requests', () => {
  it('the owner protects production in the change-policy settings', async () => {
    const page = approverPage;
    await page.goto(`/projects/${projectId}/settings`);
    await page.getByRole('link', { name: 'Change policy' }).first().click();
    await heading(page, 'Change policy').waitFor();
    await page.getByLabel('Required approvals in production').fill('1');
    // Owners and admins approve unless the owner says otherwise.
    const roles = page.getByRole('group', { name: 'Who may approve in production' });
    expect(await roles.getByLabel('owner').isChecked()).toBe(true);
    expect(await roles.getByLabel('member').isChecked()).toBe(false);
    await page.getByRole('button', { name: 'Save change policy' }).click();
    await page.getByRole('status').filter({ hasText: 'Change policy saved.' }).waitFor();
    const policy = (await owner.request('GET', `/api/projects/${projectId}/change-policy`)).body;
    expect(policy.environments.production).toMatchObject({ requiredApprovals: 1, approverRoles: ['owner', 'admin'], allowSelfApproval: false, emergencyReduce: 'allow' });
    expect(policy.environments.development?.requiredApprovals ?? 0).toBe(0);
    await screenshot(page, 'change-policy');

    // A member sees the policy but cannot change it.
    await bystanderPage.goto(`/projects/${projectId}/settings/change-policy`);
    await bystanderPage.getByText('Changing the change policy needs the owner or admin role in this project.').waitFor();
    expect(await bystanderPage.getByLabel('Required approvals in production').inputValue()).toBe('1');
    expect(await bystanderPage.getByLabel('Required approvals in production').isDisabled()).toBe(true);
    expect(await bystanderPage.getByRole('button', { name: 'Save change policy' }).count()).toBe(0);
  });

  it('the author saves a production change, is asked for approval, and opens a change request instead', async () => {
    const page = authorPage;
    await page.goto(flagHref(flagKey));
    await heading(page, /New checkout/).waitFor();
    await page.getByLabel('Default value (boolean)').selectOption('true');
    await page.getByRole('button', { name: 'Simulate and review changes' }).click();
    await page.getByRole('heading', { name: 'Review before saving' }).waitFor();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('alert').filter({ hasText: /need 1 approval/ }).waitFor();
    expect((await owner.request('GET', flagPath(flagKey))).body).toMatchObject({ version: 1, defaultValue: false });

    await page.getByRole('button', { name: 'Request approval for these changes' }).click();
    const dialog = page.getByRole('dialog', { name: 'Request approval' });
    expect(await dialog.getByLabel('Title').inputValue()).toBe(`Update ${flagKey} in production`);
    await dialog.getByLabel('Title').fill('Serve the new checkout by default');
    await dialog.getByLabel('Description (optional)').fill('Checkout v2 is ready for everyone.');
    // The schedule names the author's time zone and its offset.
    await dialog.getByLabel('Apply at (optional), Europe/Berlin (UTC+01:00)').waitFor();
    await screenshot(page, 'change-request-dialog');
    await dialog.getByRole('button', { name: 'Open change request' }).click();

    await heading(page, 'Serve the new checkout by default').waitFor();
    requestHref = new URL(page.url()).pathname;
    expect(requestHref).toMatch(new RegExp(`^/projects/${projectId}/change-requests/[^/]+$`));
    const requestId = requestHref.split('/').pop()!;
    const request = (await owner.request('GET', `/api/projects/${projectId}/change-requests/${requestId}`)).body;
    expect(request).toMatchObject({
      status: 'pending',
      title: 'Serve the new checkout by default',
      description: 'Checkout v2 is ready for everyone.',
      scheduledAt: null,
      changes: [{ serviceId, environment: 'production', flagKey, action: 'update', body: { defaultValue: true }, baseVersion: 1 }],
    });
    // The author cannot approve their own request, and is told why.
    const approve = page.getByRole('button', { name: 'Approve' });
    expect(await approve.isDisabled()).toBe(true);
    await page.getByText('You opened this request, and the change policy does not let authors approve their own.').waitFor();
  });

  it('a member whose role cannot approve sees the controls disabled, with the reason', async () => {
    const page = bystanderPage;
    await page.goto(requestHref);
    await heading(page, 'Serve the new checkout by default').waitFor();
    const approve = page.getByRole('button', { name: 'Approve' });
    expect(await approve.isDisabled()).toBe(true);
    const reason = 'Reviewing needs the owner or admin role in this project; yours is member.';
    // The reason is the buttons' description, read out with them, and shown once for both.
    const reasonId = await page.getByText(reason).getAttribute('id');
    expect(await approve.getAttribute('aria-describedby')).toBe(reasonId);
    const reject = page.getByRole('button', { name: 'Reject' });
    expect(await reject.isDisabled()).toBe(true);
    expect(await reject.getAttribute('aria-describedby')).toBe(reasonId);
    expect(await page.getByLabel('Comment').isDisabled()).toBe(true);
    await screenshot(page, 'change-request-not-approver');
  });

  it('the approver finds it in the inbox, reads the diff and the impact, approves with a comment and applies it', async () => {
    const page = approverPage;
    await page.goto(`/projects/${projectId}`);
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Change requests' }).click();
    await heading(page, 'Change requests').waitFor();
    expect(await page.getByLabel('Status').inputValue()).toBe('pending');
    const row = page.getByRole('row', { name: /Serve the new checkout by default/ });
    await row.waitFor();
    const { createdByName } = (await owner.request('GET', `/api${requestHref}`)).body;
    expect(await row.getByRole('cell').allTextContents()).toEqual(['Serve the new checkout by default', createdByName, 'production', 'Pending', 'Not scheduled']);
    await screenshot(page, 'change-requests-inbox');
    await row.getByRole('link', { name: 'Serve the new checkout by default' }).click();

    await heading(page, 'Serve the new checkout by default').waitFor();
    const change = page.getByRole('region', { name: `Update ${flagKey} in production` });
    const diff = change.getByRole('table', { name: `Update ${flagKey} in production, compared with version 1` });
    // The diff renders once the base version is read: wait for its row before reading its cells.
    const defaultRow = diff.getByRole('row', { name: /^defaultValue / });
    await defaultRow.waitFor();
    expect(await defaultRow.getByRole('cell').allTextContents()).toEqual(['~ Changed', 'false', 'true']);
    await change.getByText(/^Impact: /).waitFor();
    await page.getByText('0 of 1 required approval.').waitFor();
    await screenshot(page, 'change-request-detail');

    await page.getByLabel('Comment').fill('Looks good, ship it.');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByRole('status').filter({ hasText: 'You approved this request.' }).waitFor();
    const approvals = page.getByRole('list', { name: 'Approvals given' });
    await approvals.getByText('Olga Owner').waitFor();
    await approvals.getByText('Looks good, ship it.').waitFor();
    await page.getByText('1 of 1 required approval.').waitFor();

    await page.getByRole('button', { name: 'Apply', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Applied: the flags now serve these changes.' }).waitFor();
    await page.getByRole('definition').filter({ hasText: 'Applied' }).first().waitFor();
    // Final: nothing more to review or apply.
    expect(await page.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    expect((await owner.request('GET', flagPath(flagKey))).body).toMatchObject({ version: 2, defaultValue: true });
    expect(await evaluate(flagKey, 'user-0')).toBe(true);
    await screenshot(page, 'change-request-applied');
  });

  it('a request opened from the on/off switch, with a schedule, is rejected with a comment and changes nothing', async () => {
    const page = authorPage;
    await page.goto(flagHref(darkKey));
    const toggle = page.getByRole('switch', { name: 'Enabled in production' });
    await toggle.click();
    // A production switch asks for confirmation first.
    await page.getByRole('dialog', { name: /Turn .* on in production/ }).getByRole('button', { name: 'Turn on in production' }).click();
    await page.getByRole('alert').filter({ hasText: /Not enabled: .*need 1 approval/ }).waitFor();
    expect(await toggle.getAttribute('aria-checked')).toBe('false');
    await page.getByRole('button', { name: 'Request approval to enable' }).click();
    const dialog = page.getByRole('dialog', { name: 'Request approval' });
    expect(await dialog.getByLabel('Title').inputValue()).toBe(`Enable ${darkKey} in production`);
    const now = new Date();
    const june = now.getUTCFullYear() + (now.getUTCMonth() >= 5 ? 1 : 0);
    // Summer time in Berlin (the next 1 June: a schedule is at most a year ahead): the label follows the chosen date's offset; the API gets UTC.
    await dialog.getByLabel(/^Apply at \(optional\), Europe\/Berlin/).fill(`${june}-06-01T10:00`);
    await dialog.getByLabel('Apply at (optional), Europe/Berlin (UTC+02:00)').waitFor();
    await dialog.getByText(`Applies at ${june}-06-01 08:00 UTC.`).waitFor();
    await dialog.getByRole('button', { name: 'Open change request' }).click();
    await heading(page, `Enable ${darkKey} in production`).waitFor();
    const rejectedHref = new URL(page.url()).pathname;
    const requestId = rejectedHref.split('/').pop()!;
    const opened = (await owner.request('GET', `/api/projects/${projectId}/change-requests/${requestId}`)).body;
    expect(opened).toMatchObject({ scheduledAt: `${june}-06-01T08:00:00.000Z`, changes: [{ flagKey: darkKey, action: 'toggle', body: { enabled: true }, baseVersion: 1 }] });
    // The author may move or clear the schedule on the request's page.
    const schedule = page.getByLabel('Apply at, Europe/Berlin (UTC+02:00)');
    expect(await schedule.inputValue()).toBe(`${june}-06-01T10:00`);
    await schedule.fill('');
    await page.getByRole('button', { name: 'Clear schedule' }).click();
    await page.getByRole('status').filter({ hasText: 'Schedule cleared.' }).waitFor();
    expect((await owner.request('GET', `/api${rejectedHref}`)).body.scheduledAt).toBeNull();

    await approverPage.goto(rejectedHref);
    await heading(approverPage, `Enable ${darkKey} in production`).waitFor();
    const diff = approverPage.getByRole('table', { name: `Enable ${darkKey} in production, compared with version 1` });
    const enabledRow = diff.getByRole('row', { name: /^enabled / });
    await enabledRow.waitFor();
    expect(await enabledRow.getByRole('cell').allTextContents()).toEqual(['~ Changed', 'false', 'true']);
    // A rejection needs its reason.
    const reject = approverPage.getByRole('button', { name: 'Reject' });
    expect(await reject.isDisabled()).toBe(true);
    await approverPage.getByLabel('Comment').fill('Not before the design review.');
    await reject.click();
    await approverPage.getByRole('status').filter({ hasText: 'You rejected this request.' }).waitFor();
    await approverPage.getByText('Olga Owner rejected it').waitFor();
    await approverPage.getByText('Not before the design review.').waitFor();
    expect(await approverPage.getByRole('button', { name: /^Apply/ }).count()).toBe(0);

    const rejected = (await owner.request('GET', `/api/projects/${projectId}/change-requests/${requestId}`)).body;
    expect(rejected).toMatchObject({ status: 'rejected', rejection: { userId: owner.id, comment: 'Not before the design review.' } });
    expect((await owner.request('GET', flagPath(darkKey))).body).toMatchObject({ version: 1, enabled: false });

    // The inbox filters by status: the rejected request is under Rejected, not Pending.
    await approverPage.getByRole('link', { name: 'All change requests' }).click();
    await heading(approverPage, 'Change requests').waitFor();
    await approverPage.getByText('No pending change requests.').waitFor();
    await approverPage.getByLabel('Status').selectOption('rejected');
    await approverPage.getByRole('row', { name: new RegExp(`Enable ${darkKey} in production`) }).getByText('Rejected').waitFor();
    expect(new URL(approverPage.url()).searchParams.get('status')).toBe('rejected');
  });

  it('shows a flag that moved since the request was made; applying then fails and changes nothing', async () => {
    const change = { serviceId, environment: 'production', flagKey: searchKey, action: 'update', body: { defaultValue: true } };
    const opened = await author.request('POST', `/api/projects/${projectId}/change-requests`, { title: 'Search v2 by default', changes: [change] });
    expect(opened.status).toBe(201);
    expect((await owner.request('POST', `/api/projects/${projectId}/change-requests/${opened.body.id}/approve`, {})).status).toBe(200);
    // Switching a flag off only reduces exposure: the policy lets it through at once, and the flag moves to version 2.
    expect((await owner.request('POST', `/api/flags/${searchKey}/toggle?serviceId=${serviceId}&environment=production`, { enabled: false })).status).toBe(200);

    const page = approverPage;
    await page.goto(`/projects/${projectId}/change-requests/${opened.body.id}`);
    const moved = page.getByRole('region', { name: 'Flags moved since' });
    await moved.getByText(`${searchKey} in production: made against version 1, now at version 2.`).waitFor();
    await screenshot(page, 'change-request-conflict');
    await page.getByRole('button', { name: 'Apply', exact: true }).click();
    await page.getByRole('alert').filter({ hasText: /./ }).waitFor();
    await page.getByRole('definition').filter({ hasText: /^Failed \(CONFLICT: .*search-v2/ }).waitFor();
    expect((await owner.request('GET', `/api/projects/${projectId}/change-requests/${opened.body.id}`)).body).toMatchObject({ status: 'failed', failureReason: expect.stringMatching(/^CONFLICT/) });
    expect((await owner.request('GET', flagPath(searchKey))).body).toMatchObject({ version: 2, enabled: false, defaultValue: false });
  });

  it('the author cancels a request after confirming', async () => {
    const change = { serviceId, environment: 'production', flagKey: darkKey, action: 'toggle', body: { enabled: true } };
    const opened = await author.request('POST', `/api/projects/${projectId}/change-requests`, { title: 'Dark mode, second try', changes: [change] });
    expect(opened.status).toBe(201);
    const page = authorPage;
    await page.goto(`/projects/${projectId}/change-requests/${opened.body.id}`);
    await page.getByRole('button', { name: 'Cancel this request' }).click();
    await page.getByRole('button', { name: 'Cancel request' }).click();
    await page.getByRole('status').filter({ hasText: 'Request cancelled.' }).waitFor();
    await page.getByRole('definition').filter({ hasText: 'Cancelled' }).waitFor();
    expect((await owner.request('GET', `/api/projects/${projectId}/change-requests/${opened.body.id}`)).body.status).toBe('cancelled');
  });
});
