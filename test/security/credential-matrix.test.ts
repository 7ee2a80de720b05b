import { startTestApp, type TestApp, type TestResponse, type TestUser } from '../support/harness';
import { expectOfrepSingle } from '../support/ofrep-schema';
import { addMember, createJwt, createOpaque, createPersonalToken, createProject } from '../tokens/support';

/**
 * docs/api-reference.md#roles-and-capabilities and docs/api-reference.md#personal-access-tokens
 * as a table: every credential kind against one representative endpoint per
 * capability row, each expected to be allowed (2xx) or refused with the exact message of
 * docs/errors.md#permission-messages. Sessions per role, opaque tokens per permission, JWTs per
 * scope, personal tokens per tier (the user is the project owner) with and without owner actions.
 */

type Row = 'readFlags' | 'writeFlags' | 'deleteFlags' | 'manageSettings' | 'manageMembers' | 'deleteProject' | 'evaluate';
const ROWS: Row[] = ['readFlags', 'writeFlags', 'deleteFlags', 'manageSettings', 'manageMembers', 'deleteProject', 'evaluate'];

type Send = (method: string, path: string, body?: unknown) => Promise<TestResponse>;
/** Builds the credential for a given project (delete-project needs a fresh project per credential). */
type CredentialFactory = (projectId: string) => Promise<Send>;

const need = (permission: string) => `Forbidden: You need '${permission}' permission`;
const READ_ONLY = 'Forbidden: personal access token is read-only';
const NO_ADMIN_TIER = 'Forbidden: personal access token lacks the admin tier';
const NO_OWNER_ACTIONS = 'Forbidden: this action needs an admin token created with owner actions allowed';
const NO_EVALUATION = 'Forbidden: personal tokens cannot evaluate flags or call SDK endpoints; use a project API token';
const OK = true;

/** true = allowed; a string = refused with 403 and exactly this message. */
const EXPECTED: Record<string, Record<Row, true | string>> = {
  'session owner': { readFlags: OK, writeFlags: OK, deleteFlags: OK, manageSettings: OK, manageMembers: OK, deleteProject: OK, evaluate: OK },
  'session admin': { readFlags: OK, writeFlags: OK, deleteFlags: OK, manageSettings: OK, manageMembers: OK, deleteProject: need('delete_project'), evaluate: OK },
  'session member': {
    readFlags: OK, writeFlags: OK, deleteFlags: need('delete'), manageSettings: need('manage_settings'), manageMembers: need('manage_members'),
    deleteProject: need('delete_project'), evaluate: OK,
  },
  'session viewer': {
    readFlags: OK, writeFlags: need('write'), deleteFlags: need('delete'), manageSettings: need('manage_settings'), manageMembers: need('manage_members'),
    deleteProject: need('delete_project'), evaluate: OK,
  },
  'opaque read': {
    readFlags: OK, writeFlags: need('write'), deleteFlags: need('delete'), manageSettings: need('manage_settings'), manageMembers: need('manage_members'),
    deleteProject: need('delete_project'), evaluate: OK,
  },
  'opaque write': {
    readFlags: need('read'), writeFlags: OK, deleteFlags: need('delete'), manageSettings: need('manage_settings'), manageMembers: need('manage_members'),
    deleteProject: need('delete_project'), evaluate: need('read'),
  },
  'opaque delete': {
    readFlags: need('read'), writeFlags: need('write'), deleteFlags: OK, manageSettings: need('manage_settings'), manageMembers: need('manage_members'),
    deleteProject: need('delete_project'), evaluate: need('read'),
  },
  'jwt read': {
    readFlags: OK, writeFlags: need('write'), deleteFlags: need('delete'), manageSettings: need('manage_settings'), manageMembers: need('manage_members'),
    deleteProject: need('delete_project'), evaluate: OK,
  },
  'jwt write': {
    readFlags: need('read'), writeFlags: OK, deleteFlags: need('delete'), manageSettings: need('manage_settings'), manageMembers: need('manage_members'),
    deleteProject: need('delete_project'), evaluate: need('read'),
  },
  'jwt delete': {
    readFlags: need('read'), writeFlags: need('write'), deleteFlags: OK, manageSettings: need('manage_settings'), manageMembers: need('manage_members'),
    deleteProject: need('delete_project'), evaluate: need('read'),
  },
  'jwt manage_settings': {
    readFlags: need('read'), writeFlags: need('write'), deleteFlags: need('delete'), manageSettings: OK, manageMembers: need('manage_members'),
    deleteProject: need('delete_project'), evaluate: need('read'),
  },
  'jwt manage_members': {
    readFlags: need('read'), writeFlags: need('write'), deleteFlags: need('delete'), manageSettings: need('manage_settings'), manageMembers: OK,
    deleteProject: need('delete_project'), evaluate: need('read'),
  },
  'pat read': {
    readFlags: OK, writeFlags: READ_ONLY, deleteFlags: READ_ONLY, manageSettings: READ_ONLY, manageMembers: READ_ONLY, deleteProject: READ_ONLY,
    evaluate: NO_EVALUATION,
  },
  'pat write': {
    readFlags: OK, writeFlags: OK, deleteFlags: OK, manageSettings: NO_ADMIN_TIER, manageMembers: NO_ADMIN_TIER, deleteProject: NO_ADMIN_TIER,
    evaluate: NO_EVALUATION,
  },
  'pat admin': {
    readFlags: OK, writeFlags: OK, deleteFlags: OK, manageSettings: OK, manageMembers: OK, deleteProject: NO_OWNER_ACTIONS, evaluate: NO_EVALUATION,
  },
  'pat admin + owner actions': {
    readFlags: OK, writeFlags: OK, deleteFlags: OK, manageSettings: OK, manageMembers: OK, deleteProject: OK, evaluate: NO_EVALUATION,
  },
};

let app: TestApp;
let owner: TestUser;
let roleUsers: Record<'admin' | 'member' | 'viewer', TestUser>;
let projectId: string;
let serviceId: string;
const credentials: Record<string, CredentialFactory> = {};
const sends: Record<string, Send> = {};

const READ_KEY = 'matrix-read';
const DELETE_KEY = 'matrix-delete';
const ENV = 'development';

beforeAll(async () => {
  app = await startTestApp();
  owner = await app.signup({ verified: true });
  roleUsers = { admin: await app.signup(), member: await app.signup(), viewer: await app.signup() };

  const bearer = (token: string): Send => (method, path, body) => app.request(method, path, { token, body });
  const session = (user: TestUser): Send => (method, path, body) => user.request(method, path, body);

  credentials['session owner'] = async () => session(owner);
  for (const role of ['admin', 'member', 'viewer'] as const) {
    credentials[`session ${role}`] = async (pid) => {
      if (pid !== projectId) await addMember(owner, pid, roleUsers[role].id, role);
      return session(roleUsers[role]);
    };
  }
  for (const permission of ['read', 'write', 'delete']) {
    credentials[`opaque ${permission}`] = async (pid) => bearer((await createOpaque(owner, pid, { [permission]: true })).value);
  }
  for (const scope of ['read', 'write', 'delete', 'manage_settings', 'manage_members']) {
    credentials[`jwt ${scope}`] = async (pid) => bearer((await createJwt(owner, pid, [scope])).accessToken);
  }
  // Personal tokens are the user's, across projects: one each is enough.
  const pats = {
    'pat read': await createPersonalToken(owner, { tier: 'read' }),
    'pat write': await createPersonalToken(owner, { tier: 'write' }),
    'pat admin': await createPersonalToken(owner, { tier: 'admin' }),
    'pat admin + owner actions': await createPersonalToken(owner, { tier: 'admin', allowOwnerActions: true }),
  };
  for (const [label, pat] of Object.entries(pats)) credentials[label] = async () => bearer(pat.value);

  projectId = await createProject(owner, 'Matrix');
  for (const role of ['admin', 'member', 'viewer'] as const) await addMember(owner, projectId, roleUsers[role].id, role);
  const service = await owner.request('POST', '/api/services', { projectId, name: 'matrix service' });
  expect(service.status).toBe(201);
  serviceId = service.body.id;
  const flag = await owner.request('POST', '/api/flags', { key: READ_KEY, serviceId, environment: ENV, name: 'Matrix read', type: 'boolean', defaultValue: false });
  expect(flag.status).toBe(201);
  for (const label of Object.keys(EXPECTED)) sends[label] = await credentials[label](projectId);
});
afterAll(() => app?.stop());

const flagQuery = () => `serviceId=${encodeURIComponent(serviceId)}&environment=${ENV}`;

async function ensureDeleteTarget() {
  const res = await owner.request('POST', '/api/flags', { key: DELETE_KEY, serviceId, environment: ENV, name: 'Matrix delete', type: 'boolean', defaultValue: false });
  expect([201, 409]).toContain(res.status);
}

async function deleteTargetExists() {
  return (await owner.request('GET', `/api/flags/${DELETE_KEY}?${flagQuery()}`)).status === 200;
}

/** One representative call per capability row; returns the response. */
const CALLS: Record<Row, (label: string) => Promise<TestResponse>> = {
  readFlags: (label) => sends[label]('GET', `/api/flags/${READ_KEY}?${flagQuery()}`),
  writeFlags: (label) => sends[label]('POST', `/api/flags/${READ_KEY}/toggle?${flagQuery()}`),
  deleteFlags: async (label) => {
    await ensureDeleteTarget();
    const res = await sends[label]('DELETE', `/api/flags/${DELETE_KEY}?${flagQuery()}`);
    // A refusal changes nothing; an allowed delete removes the flag.
    expect(await deleteTargetExists()).toBe(res.status >= 400);
    return res;
  },
  manageSettings: (label) => sends[label]('PATCH', `/api/projects/${projectId}`, { description: `set by ${label}` }),
  manageMembers: (label) => sends[label]('PATCH', `/api/projects/${projectId}/members/${roleUsers.viewer.id}`, { role: 'viewer' }),
  deleteProject: async (label) => {
    const fresh = await createProject(owner, `Doomed ${label}`);
    const send = await credentials[label](fresh);
    const res = await send('DELETE', `/api/projects/${fresh}`);
    const stillThere = (await owner.request('GET', `/api/projects/${fresh}`)).status === 200;
    expect(stillThere).toBe(res.status >= 400);
    return res;
  },
  evaluate: (label) =>
    sends[label]('POST', '/api/flags/evaluate', { flagKey: READ_KEY, serviceId, environment: ENV, defaultValue: true, context: { targetingKey: 'user-1' } }),
};

describe.each(Object.keys(EXPECTED))('%s', (label) => {
  it.each(ROWS)('%s', async (row) => {
    const expected = EXPECTED[label][row];
    const res = await CALLS[row](label);
    if (expected === true) {
      expect({ row, status: res.status, body: res.status >= 300 ? res.body : undefined }).toEqual({ row, status: expect.any(Number), body: undefined });
      expect(res.status).toBeLessThan(300);
    } else {
      expect({ row, status: res.status, message: res.body?.message }).toEqual({ row, status: 403, message: expected });
    }
  });
});

describe('personal tokens on evaluation and SDK endpoints', () => {
  it.each(['control', 'data'] as const)('are refused with 403 FORBIDDEN on the %s listener: REST, OFREP and SSE', async (listener) => {
    const pat = await createPersonalToken(owner, { tier: 'admin', allowOwnerActions: true });
    const body = { flagKey: READ_KEY, serviceId, environment: ENV, defaultValue: true, context: { targetingKey: 'user-1' } };
    const rest = await app.request('POST', '/api/flags/evaluate', { listener, token: pat.value, body });
    expect(rest.status).toBe(403);
    expect(rest.body).toMatchObject({ error: 'FORBIDDEN', message: NO_EVALUATION });
    const ofrep = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${READ_KEY}`, {
      listener,
      token: pat.value,
      headers: { 'x-service-id': serviceId },
      body: { context: { targetingKey: 'user-1' } },
    });
    expect(ofrep.status).toBe(403);
    expect(ofrep.body).toMatchObject({ key: READ_KEY, errorCode: 'PROVIDER_NOT_READY', errorDetails: NO_EVALUATION });
    expectOfrepSingle(ofrep);
    const sse = await app.request('GET', `/api/flags/stream?serviceId=${encodeURIComponent(serviceId)}`, { listener, token: pat.value });
    expect(sse.status).toBe(403);
    // The same request with a read project token is served.
    const opaque = await createOpaque(owner, projectId, { read: true });
    expect((await app.request('POST', '/api/flags/evaluate', { listener, token: opaque.value, body })).status).toBe(200);
  });
});
