/**
 * The change-request and change-policy routes as their contract describes them, until the API
 * serving them is merged and schema.d.ts is regenerated from it (this file then goes).
 */
export {};

type Role = 'owner' | 'admin' | 'member';
type Env = 'development' | 'staging' | 'production';
type Status = 'pending' | 'approved' | 'scheduled' | 'applied' | 'rejected' | 'cancelled' | 'failed';
interface EnvPolicy {
  requiredApprovals: number;
  approverRoles: Role[];
  allowSelfApproval?: boolean;
  emergencyReduce?: 'allow' | 'approve';
}
interface Policy {
  environments: { [E in Env]?: EnvPolicy };
}
interface Change {
  serviceId: string;
  environment: Env;
  flagKey: string;
  action: 'create' | 'update' | 'toggle' | 'delete';
  body?: { [key: string]: unknown };
  baseVersion?: number | null;
}
interface ChangeRequest {
  id: string;
  projectId: string;
  status: Status;
  title: string;
  description: string | null;
  changes: (Change & { baseVersion: number | null })[];
  approvals: { userId: string; name: string; at: string; comment?: string }[];
  rejection: { userId: string; name: string; at: string; comment: string } | null;
  requiredApprovals: number;
  approverRoles: Role[];
  allowSelfApproval: boolean;
  createdBy: string | null;
  createdByName: string;
  scheduledAt: string | null;
  impact: { serviceId: string; flagKey: string; environment: Env; changed: number; evaluated: number }[];
  conflicts: { serviceId: string; environment: Env; flagKey: string; baseVersion: number; currentVersion: number | null }[];
  failureReason: string | null;
  appliedAt: string | null;
  createdAt: string;
  updatedAt: string;
  actions: { edit: boolean; approve: boolean; reject: boolean; cancel: boolean; apply: boolean };
}
type Json<T> = { content: { 'application/json': T } };
interface Read<Path, Answer, Query = never> {
  parameters: { query?: Query; header?: never; path: Path; cookie?: never };
  requestBody?: never;
  responses: { 200: Json<Answer> };
}
interface Write<Path, Body, Answer> {
  parameters: { query?: never; header?: never; path: Path; cookie?: never };
  requestBody: Json<Body>;
  responses: { 200: Json<Answer>; 201: Json<Answer> };
}
interface Command<Path, Answer> {
  parameters: { query?: never; header?: never; path: Path; cookie?: never };
  requestBody?: never;
  responses: { 200: Json<Answer> };
}
type ById = { id: string };
type ByRequest = { id: string; requestId: string };
interface Route {
  parameters: { query?: never; header?: never; path?: never; cookie?: never };
  put?: never;
  post?: never;
  delete?: never;
  options?: never;
  head?: never;
  patch?: never;
  trace?: never;
  get?: never;
}

declare module './schema' {
  interface paths {
    '/api/projects/{id}/change-policy': Omit<Route, 'get' | 'put'> & { get: Read<ById, Policy>; put: Write<ById, Policy, Policy> };
    '/api/projects/{id}/change-requests': Omit<Route, 'get' | 'post'> & {
      get: Read<ById, { changeRequests: ChangeRequest[]; total: number }, { status?: Status; limit?: number; offset?: number }>;
      post: Write<ById, { title: string; description?: string; changes: Change[]; scheduledAt?: string }, ChangeRequest>;
    };
    '/api/projects/{id}/change-requests/{requestId}': Omit<Route, 'get' | 'patch'> & {
      get: Read<ByRequest, ChangeRequest>;
      patch: Write<ByRequest, { title?: string; description?: string; changes?: Change[]; scheduledAt?: string | null }, ChangeRequest>;
    };
    '/api/projects/{id}/change-requests/{requestId}/approve': Omit<Route, 'post'> & { post: Write<ByRequest, { comment?: string }, ChangeRequest> };
    '/api/projects/{id}/change-requests/{requestId}/reject': Omit<Route, 'post'> & { post: Write<ByRequest, { comment: string }, ChangeRequest> };
    '/api/projects/{id}/change-requests/{requestId}/cancel': Omit<Route, 'post'> & { post: Command<ByRequest, ChangeRequest> };
    '/api/projects/{id}/change-requests/{requestId}/apply': Omit<Route, 'post'> & { post: Command<ByRequest, ChangeRequest> };
  }
}
