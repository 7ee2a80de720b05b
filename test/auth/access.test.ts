import { decide, refusal } from '../../api/auth/access';
import { orgRoleGrants } from '../../api/auth/permissions';
import type { Principal, ProjectRole } from '../../api/auth/principal';

/**
 * The core decision every route, bulk item and data-plane grant asks (api/auth/access.ts).
 * HTTP tests cover it end to end (test/projects/role-matrix.test.ts, test/security/*); this
 * pins the decision table and the texts of docs/errors.md#permission-messages without a server.
 */
const user = { id: 'usr_1', email: 'a@example.com', name: 'A', emailVerified: true, createdAt: '2024-01-01T00:00:00Z' };
const session: Principal = { type: 'session', user, sessionId: 's', csrfToken: 'c' };
const token = (scopes: ('read' | 'write' | 'delete' | 'manage_settings' | 'manage_members')[]): Principal => ({
  type: 'project_api_token',
  tokenId: 'tok_1',
  tokenType: 'opaque',
  projectId: 'prj_1',
  scopes,
  createdBy: null,
});
const personal = (tier: 'read' | 'write' | 'admin', allowOwnerActions = false): Principal => ({
  type: 'personal_access_token',
  tokenId: 'pat_1',
  user,
  tier,
  allowOwnerActions,
});
const owner: ProjectRole = 'owner';

it('refuses anonymous callers before anything else', () => {
  expect(decide({ type: 'anonymous' }, 'prj_1', owner, 'flags:read')).toBe('anonymous');
});

it('hides projects the caller has no access to at all', () => {
  expect(decide(token(['read']), 'prj_2', null, 'flags:read')).toBe('hidden');
  expect(decide(session, 'prj_1', null, 'flags:read')).toBe('hidden');
  expect(decide(personal('admin', true), 'prj_1', null, 'flags:read')).toBe('hidden');
});

it('grants what scopes and roles hold, and names what is missing', () => {
  expect(decide(token(['read']), 'prj_1', null, 'flags:read')).toBeNull();
  expect(decide(token(['read']), 'prj_1', null, 'flags:write')).toBe('missing');
  expect(decide(token(['manage_members']), 'prj_1', null, 'members:view')).toBeNull();
  expect(decide(session, 'prj_1', 'viewer', 'flags:read')).toBeNull();
  expect(decide(session, 'prj_1', 'viewer', 'flags:write')).toBe('missing');
  expect(decide(session, 'prj_1', 'admin', 'project:delete')).toBe('missing');
  expect(decide(session, 'prj_1', owner, 'project:delete')).toBeNull();
});

it('bounds personal tokens by their tier and owner actions, after the role', () => {
  expect(decide(personal('read'), 'prj_1', owner, 'flags:read')).toBeNull();
  expect(decide(personal('read'), 'prj_1', owner, 'flags:write')).toBe('read-only');
  expect(decide(personal('write'), 'prj_1', owner, 'members:manage')).toBe('admin-tier');
  expect(decide(personal('admin'), 'prj_1', owner, 'project:delete')).toBe('owner-actions');
  expect(decide(personal('admin', true), 'prj_1', owner, 'project:delete')).toBeNull();
  // The role decides first: a viewer's admin token still lacks the permission.
  expect(decide(personal('admin', true), 'prj_1', 'viewer', 'flags:write')).toBe('missing');
});

it('answers each denial with its documented status and text', () => {
  const answer = (e: { status: number; message: string }) => [e.status, e.message];
  expect(answer(refusal('anonymous', 'flags:read'))).toEqual([401, expect.any(String)]);
  expect(answer(refusal('hidden', 'flags:read'))).toEqual([404, 'Project not found']);
  expect(answer(refusal('hidden', 'flags:read', 'Service'))).toEqual([404, 'Service not found']);
  expect(answer(refusal('missing', 'flags:delete'))).toEqual([403, "Forbidden: You need 'delete' permission"]);
  expect(answer(refusal('missing', 'members:view'))).toEqual([403, "Forbidden: You need 'manage_members' permission"]);
  expect(answer(refusal('read-only', 'flags:write'))).toEqual([403, 'Forbidden: personal access token is read-only']);
  expect(answer(refusal('admin-tier', 'members:manage'))).toEqual([403, 'Forbidden: personal access token lacks the admin tier']);
  expect(answer(refusal('owner-actions', 'project:delete'))).toEqual([403, 'Forbidden: this action needs an admin token created with owner actions allowed']);
});

it('lets every organization member view and its owners and admins manage', () => {
  expect(orgRoleGrants('member', 'org:view')).toBe(true);
  expect(orgRoleGrants('member', 'org:manage')).toBe(false);
  expect(orgRoleGrants('admin', 'org:manage')).toBe(true);
  expect(orgRoleGrants('owner', 'org:manage')).toBe(true);
});
