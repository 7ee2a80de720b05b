import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, opaqueToken, qs, type Project } from '../webhooks/support';
import { CliProcess, formOf, runCli } from './support';

/**
 * The flagship CLI as a child process against a running server over real HTTP: the browser login
 * (the test plays the browser with the owner's session), then every command with the stored token.
 */

let app: TestApp;
let p: Project;
let configHome: string;
let env: Record<string, string>;
const key = `cli-${randomBytes(3).toString('hex')}`;
const RULE = { id: 'beta', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: true };

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  expectStatus(await p.owner.request('POST', '/api/flags', { key, name: 'CLI flag', type: 'boolean', serviceId: p.serviceId, environment: 'production', defaultValue: false, targeting: [RULE] }), 201, 'create flag');
  configHome = fs.mkdtempSync(path.join(os.tmpdir(), 'flagship-cli-'));
  env = { XDG_CONFIG_HOME: configHome };
}, 60_000);
afterAll(async () => {
  await app?.stop();
  if (configHome) fs.rmSync(configHome, { recursive: true, force: true });
});

const cli = (...args: string[]) => runCli(args, env);
const json = (stdout: string) => JSON.parse(stdout);
const scope = ['--service', '', '--env', 'production'];
beforeAll(() => (scope[1] = p.serviceId));
const credentialsFile = () => path.join(configHome, 'flagship', 'credentials.json');

describe('flagship login', () => {
  it('completes the browser flow through the loopback callback and stores the token 0600', async () => {
    const login = new CliProcess(['login', '--server', app.urls.control, '--no-browser', '--timeout', '120'], env);
    const [approvalUrl] = await login.waitFor('stderr', /http:\/\/\S+\/auth\/cli\?\S+/);
    const url = new URL(approvalUrl);
    const callback = url.searchParams.get('callback')!;
    expect(callback).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    expect(url.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);

    // The browser: the approval page with the owner's session, then its form.
    const page = await fetch(approvalUrl, { headers: { cookie: p.owner.cookie } });
    expect(page.status).toBe(200);
    const approval = formOf(await page.text());
    const approved = await fetch(new URL(approval.action, app.urls.control), {
      method: 'POST',
      headers: { cookie: p.owner.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...approval.fields, projects: 'all' }),
    });
    expect(approved.status).toBe(200);
    const handoff = formOf(await approved.text(), 'handoff');
    expect(handoff.action).toBe(callback);

    // An answer for another login is turned away and the CLI keeps waiting.
    const stranger = await fetch(callback, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ ...handoff.fields, state: 'x'.repeat(43) }) });
    expect(stranger.status).toBe(400);

    // The page's auto-submitted form.
    const delivered = await fetch(handoff.action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(handoff.fields) });
    expect(delivered.status).toBe(200);
    expect(await delivered.text()).toMatch(/close this tab/);
    expect(await login.exited).toBe(0);
    expect(login.stdout).toContain(`Logged in to ${app.urls.control} as ${p.owner.email}`);

    const file = credentialsFile();
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual({ server: app.urls.control, token: handoff.fields.token });
  });

  it('acts as the owner through a write personal token', async () => {
    const res = await cli('whoami', '--json');
    expect(res.code).toBe(0);
    expect(json(res.stdout)).toMatchObject({ server: app.urls.control, user: { email: p.owner.email }, credential: { type: 'personal_access_token', tier: 'write' } });
  });

  it('stops with exit 1 when the login is denied in the browser', async () => {
    const login = new CliProcess(['login', '--server', app.urls.control, '--no-browser'], { XDG_CONFIG_HOME: fs.mkdtempSync(path.join(os.tmpdir(), 'flagship-cli-')) });
    const [approvalUrl] = await login.waitFor('stderr', /http:\/\/\S+\/auth\/cli\?\S+/);
    const deny = formOf(await (await fetch(approvalUrl, { headers: { cookie: p.owner.cookie } })).text().then((html) => html.slice(html.indexOf('</form>') + 7)));
    expect(deny.fields.error).toBe('access_denied');
    expect((await fetch(deny.action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(deny.fields) })).status).toBe(200);
    expect(await login.exited).toBe(1);
    expect(login.stderr).toMatch(/denied/);
  });
});

describe('flag commands', () => {
  it('lists the project flags as JSON and as a table', async () => {
    const listed = await cli('flags', 'list', '--project', p.projectId, '--json');
    expect(listed.code).toBe(0);
    expect(json(listed.stdout).flags.map((f: { key: string }) => f.key)).toEqual([key]);
    const table = await cli('flags', 'list', '--project', p.projectId, '--env', 'production');
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^KEY\s+ENV\s+SERVICE\s+ENABLED\s+TYPE\s+NAME$/);
    expect(table.stdout).toMatch(new RegExp(`^${key}\\s+production\\s+${p.serviceId}\\s+off\\s+boolean\\s+CLI flag$`, 'm'));
  });

  it('gets and toggles a flag', async () => {
    const got = await cli('flags', 'get', key, ...scope, '--json');
    expect(got.code).toBe(0);
    expect(json(got.stdout)).toMatchObject({ key, enabled: false, environment: 'production' });

    const on = await cli('flags', 'toggle', key, ...scope, '--on', '--json');
    expect(on.code).toBe(0);
    expect(json(on.stdout)).toMatchObject({ key, enabled: true });
    const [{ actor }] = await app.platform.db.sql`SELECT actor FROM audit_logs WHERE action = 'flag.toggle' AND resource_name = ${key} ORDER BY timestamp DESC LIMIT 1`;
    expect(actor).toMatch(new RegExp(`^${p.owner.email} \\(personal token `));

    const human = await cli('flags', 'get', key, ...scope);
    expect(human.stdout).toMatch(new RegExp(`^${key}  ON  \\(production, service ${p.serviceId}\\)`));
    expect(human.stdout).toMatch(/rules:\s+1/);
  });

  it('evaluates through explain with the login, and through the evaluation endpoint with a project token', async () => {
    const context = JSON.stringify({ targetingKey: 'u1', plan: 'beta' });
    // Evaluation's snapshot learns of the toggle through the change bus.
    const explained = await eventually(async () => {
      const res = await cli('flags', 'evaluate', key, ...scope, '--context', context, '--json');
      return res.code === 0 && json(res.stdout).value === true ? json(res.stdout) : undefined;
    });
    expect(explained).toMatchObject({ flagKey: key, value: true, reason: 'TARGETING_MATCH', ruleId: 'beta' });
    expect(explained.rules[0].conditions[0]).toEqual({ property: 'plan', operator: 'equals', expected: 'beta', actual: 'beta', passed: true });

    const human = await cli('flags', 'evaluate', key, ...scope, '--context', JSON.stringify({ targetingKey: 'u2', plan: 'free' }));
    expect(human.stdout).toMatch(new RegExp(`^${key} = false  \\(DEFAULT\\)`));
    expect(human.stdout).toContain('✗ plan equals beta (actual free)');

    const token = await opaqueToken(p.owner, p.projectId, { read: true });
    const evaluated = await cli('flags', 'evaluate', key, ...scope, '--context', context, '--token', token, '--json');
    expect(evaluated.code).toBe(0);
    expect(json(evaluated.stdout)).toMatchObject({ value: true, reason: 'TARGETING_MATCH' });
  });

  it('follows a flag through its history with the login', async () => {
    const tail = new CliProcess(['flags', 'tail', key, ...scope, '--interval', '1', '--json'], env);
    try {
      await tail.waitFor('stdout', /\n\}\n/);
      const start = json(tail.stdout.trim());
      expect(start).toMatchObject({ change: 'toggle', enabled: true });
      expectStatus(await p.member.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, { enabled: false }), 200, 'toggle');
      await tail.waitFor('stdout', /"enabled": false/);
      const second = json(tail.stdout.slice(tail.stdout.indexOf('}\n{') + 2));
      expect(second).toMatchObject({ version: start.version + 1, change: 'toggle', enabled: false, actor: p.member.email, by: expect.stringMatching(/^User \d+$/) });
    } finally {
      tail.child.kill('SIGINT');
    }
    expect(await tail.exited).toBe(0);
  });

  it('follows a flag on the SSE stream with a project token', async () => {
    const token = await opaqueToken(p.owner, p.projectId, { read: true });
    const tail = new CliProcess(['flags', 'tail', key, ...scope, '--token', token], env);
    try {
      await tail.waitFor('stderr', /SSE stream/);
      expectStatus(await p.member.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, { enabled: true }), 200, 'toggle');
      await tail.waitFor('stdout', /v\d+\s+update\s+ON/);
    } finally {
      tail.child.kill('SIGINT');
    }
    expect(await tail.exited).toBe(0);
  });

  it('shows a canary pipeline', async () => {
    const started = await p.owner.request('POST', `/api/flags/${key}/canary`, {
      serviceId: p.serviceId,
      environment: 'production',
      ruleId: 'beta',
      initialRolloutPercent: 10,
      targetRolloutPercent: 50,
      rampStepPercent: 20,
      soakPeriodMinutes: 30,
      errorRateGateDelta: 0.01,
      latencyGateDeltaMs: 50,
      autoRollbackOnBreach: true,
    });
    expectStatus(started, 201, 'start canary');
    try {
      const shown = await cli('canary', 'show', key, ...scope, '--json');
      expect(shown.code).toBe(0);
      expect(json(shown.stdout)).toMatchObject({ id: started.body.id, flagKey: key, status: 'running', currentStage: { rolloutPercent: 10 } });
      const human = await cli('canary', 'show', key, ...scope);
      expect(human.stdout).toContain(`${key} canary ${started.body.id}: running`);
      expect(human.stdout).toMatch(/stage:\s+#1 10% since/);
    } finally {
      await p.owner.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, environment: 'production', reason: 'test done' });
    }
  });
});

describe('errors and exit codes', () => {
  it('exits 1 with the API message for an unknown flag (and the envelope as JSON with --json)', async () => {
    const res = await cli('flags', 'get', 'no-such-flag', ...scope);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(/^Error: .*not found \(HTTP 404\)/);
    const asJson = await cli('flags', 'get', 'no-such-flag', ...scope, '--json');
    expect(asJson.code).toBe(1);
    expect(JSON.parse(asJson.stderr)).toMatchObject({ error: 'Not Found', status: 404, exitCode: 1 });
  });

  it('exits 1 on usage errors and bad --context', async () => {
    expect((await cli('flags', 'toggle', key, '--service', p.serviceId)).code).toBe(1);
    const res = await cli('flags', 'evaluate', key, ...scope, '--context', 'not json');
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/--context must be JSON/);
  });

  it('exits 2 when not logged in, or when the server refuses the token', async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'flagship-cli-'));
    const none = await runCli(['flags', 'list', '--project', p.projectId], { XDG_CONFIG_HOME: empty });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/flagship login/);
    const bogus = await runCli(['whoami', '--server', app.urls.control], { XDG_CONFIG_HOME: empty, FLAGSHIP_TOKEN: `fgp_${'0'.repeat(64)}` });
    expect(bogus.code).toBe(2);
  });

  it('logout forgets the token', async () => {
    const res = await cli('logout');
    expect(res.code).toBe(0);
    expect(fs.existsSync(credentialsFile())).toBe(false);
    expect((await cli('whoami')).code).toBe(2);
  });
});
