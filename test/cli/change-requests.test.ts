import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { createFlag, createProject, expectStatus, opaqueToken, personalToken, type Project } from '../webhooks/support';
import { runCli } from './support';

/**
 * `flagship change-requests …` (docs/cli.md#change-requests) as a child process against a running
 * server, each user with a write personal token (FLAGSHIP_TOKEN).
 */

let app: TestApp;
let p: Project;
let other: Project;
let configHome: string;
const key = `cli-cr-${Date.now().toString(36)}`;
const tokens = new Map<TestUser, string>();

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
  for (const project of [p, other]) {
    await createFlag(project.owner, project.serviceId, key);
    const policy = { environments: { production: { requiredApprovals: 1, approverRoles: ['owner', 'admin'], allowSelfApproval: false } } };
    expectStatus(await project.owner.request('PUT', `/api/projects/${project.projectId}/change-policy`, policy), 200, 'change policy');
  }
  for (const user of [p.owner, p.admin, p.member, other.owner]) tokens.set(user, await personalToken(user, 'write'));
  configHome = fs.mkdtempSync(path.join(os.tmpdir(), 'flagship-cli-'));
}, 60_000);
afterAll(async () => {
  await app?.stop();
  if (configHome) fs.rmSync(configHome, { recursive: true, force: true });
});

const withToken = (token: string, ...args: string[]) => runCli(args, { XDG_CONFIG_HOME: configHome, FLAGSHIP_SERVER: app.urls.control, FLAGSHIP_TOKEN: token });
const as = (user: TestUser, ...args: string[]) => withToken(tokens.get(user)!, ...args);
const json = (stdout: string) => JSON.parse(stdout);
const change = (project: Project, enabled: boolean) => JSON.stringify({ serviceId: project.serviceId, environment: 'production', flagKey: key, action: 'toggle', body: { enabled } });

async function open(user: TestUser, project: Project, enabled: boolean): Promise<string> {
  const res = await as(user, 'change-requests', 'create', '--project', project.projectId, '--title', `Toggle ${enabled}`, '--change', change(project, enabled), '--json');
  expect(res.code).toBe(0);
  return json(res.stdout).id;
}

describe('flagship change-requests', () => {
  it('flags toggle in a protected environment fails with the command that opens a request for it', async () => {
    const refused = await as(p.member, 'flags', 'toggle', key, '--service', p.serviceId, '--env', 'production', '--on');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^Error: .*approval.*\(HTTP 403\)$/m);
    expect(refused.stderr).toContain(`Hint: open a change request and have it approved: flagship change-requests create --project ${p.projectId} --title 'toggle ${key} in production' --change '${change(p, true)}'`);
    const asJson = await as(p.member, 'flags', 'toggle', key, '--service', p.serviceId, '--env', 'production', '--on', '--json');
    expect(JSON.parse(asJson.stderr)).toMatchObject({ status: 403, code: 'APPROVAL_REQUIRED', hint: expect.stringContaining('flagship change-requests create'), exitCode: 1 });
  });

  it('opens, lists and shows a request; approved by an admin, applied by its author', async () => {
    const opened = await as(p.member, 'change-requests', 'create', '--project', p.projectId, '--title', 'Turn it on', '--change', change(p, true));
    expect(opened.code).toBe(0);
    const [, id] = /^Opened change request (\S+): pending$/m.exec(opened.stdout)!;
    expect(opened.stdout).toMatch(/approvals: 0 of 1/);

    const listed = await as(p.member, 'change-requests', 'list', '--project', p.projectId, '--status', 'pending', '--json');
    expect(json(listed.stdout)).toMatchObject({ total: 1, changeRequests: [{ id, status: 'pending', title: 'Turn it on' }] });
    const table = await as(p.member, 'change-requests', 'list', '--project', p.projectId);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+STATUS\s+APPROVALS\s+CHANGES\s+AUTHOR\s+CREATED\s+TITLE$/);
    expect(table.stdout).toMatch(new RegExp(`^${id}\\s+pending\\s+0/1\\s+1\\s+.*Turn it on$`, 'm'));
    expect((await as(p.member, 'change-requests', 'list', '--project', p.projectId, '--status', 'nope')).code).toBe(1);

    const shown = await as(p.member, 'change-requests', 'show', id, '--project', p.projectId);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^${id}  pending  Turn it on$`, 'm'));
    expect(shown.stdout).toContain(`toggle ${key} (production, service ${p.serviceId}) from version 1: {"enabled":true}`);
    expect(shown.stdout).toMatch(/you may: .*cancel/);

    // The member is not among the policy's approvers; a project API token is not a person.
    const byMember = await as(p.member, 'change-requests', 'approve', id, '--project', p.projectId);
    expect(byMember.code).toBe(1);
    expect(byMember.stderr).toMatch(/only owner or admin may approve.*\(HTTP 403\)/);
    const projectToken = await opaqueToken(p.owner, p.projectId, { read: true, write: true });
    const byToken = await withToken(projectToken, 'change-requests', 'approve', id, '--project', p.projectId, '--json');
    expect(byToken.code).toBe(1);
    expect(JSON.parse(byToken.stderr)).toMatchObject({ status: 403, message: expect.stringMatching(/project API tokens cannot/) });

    const approved = await as(p.admin, 'change-requests', 'approve', id, '--project', p.projectId, '--comment', 'ship it', '--json');
    expect(approved.code).toBe(0);
    expect(json(approved.stdout)).toMatchObject({ status: 'approved', approvals: [{ userId: p.admin.id, comment: 'ship it' }] });

    const applied = await as(p.member, 'change-requests', 'apply', id, '--project', p.projectId);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toContain(`${id} is now applied`);
    const flag = await as(p.member, 'flags', 'get', key, '--service', p.serviceId, '--env', 'production', '--json');
    expect(json(flag.stdout)).toMatchObject({ enabled: true });
  });

  it('refuses self-approval; rejects with a comment; cancels', async () => {
    const file = path.join(configHome, 'changes.json');
    fs.writeFileSync(file, `[${change(p, false)}]`);
    const created = await as(p.admin, 'change-requests', 'create', '--project', p.projectId, '--title', 'Off', '--file', file, '--json');
    expect(created.code).toBe(0);
    const id = json(created.stdout).id;
    const own = await as(p.admin, 'change-requests', 'approve', id, '--project', p.projectId);
    expect(own.code).toBe(1);
    expect(own.stderr).toMatch(/cannot approve your own change request \(HTTP 403\)/);

    expect((await as(p.owner, 'change-requests', 'reject', id, '--project', p.projectId)).code).toBe(1);
    const rejected = await as(p.owner, 'change-requests', 'reject', id, '--project', p.projectId, '--comment', 'not today');
    expect(rejected.code).toBe(0);
    expect(rejected.stdout).toContain(`${id} is now rejected`);

    const second = await open(p.member, p, false);
    const cancelled = await as(p.member, 'change-requests', 'cancel', second, '--project', p.projectId, '--json');
    expect(json(cancelled.stdout)).toMatchObject({ id: second, status: 'cancelled' });
  });

  it('needs changes, and answers 404 for another project’s request', async () => {
    const none = await as(p.member, 'change-requests', 'create', '--project', p.projectId, '--title', 'Empty');
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/--change/);
    const badJson = await as(p.member, 'change-requests', 'create', '--project', p.projectId, '--title', 'Bad', '--change', '{nope');
    expect(badJson.stderr).toMatch(/--change must be JSON/);

    const elsewhere = await open(other.owner, other, true);
    const viaP = await as(p.owner, 'change-requests', 'show', elsewhere, '--project', p.projectId);
    expect(viaP.code).toBe(1);
    expect(viaP.stderr).toMatch(/not found \(HTTP 404\)/);
    const notMember = await as(p.owner, 'change-requests', 'approve', elsewhere, '--project', other.projectId);
    expect(notMember.stderr).toMatch(/HTTP 404/);
  });
});
