import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { HttpError } from '../../http/errors';
import { EnvironmentSchema } from '../../domain/environments';
import { TargetingRuleInputSchema } from '../flags/schema';
import { APPROVAL_REQUIRED } from '../change-requests/gate';
import { CHANGE_REQUEST_STATUSES, ChangeRequestCreateSchema } from '../change-requests/schema';
import { idSchema } from '../projects/common';
import type { Caller, RouteCall, RouteInvoker } from './invoke';

const key = z.string().min(1).max(256).describe('The flag key');
const serviceId = z.string().min(1).max(128).describe('The service the flag belongs to (from list_flags)');
const environment = EnvironmentSchema.describe('development, staging or production');
const flagRef = { key, serviceId, environment };
const projectId = z.string().min(1).max(128).describe('A project id (from list_projects)');
const confirm = z.boolean().optional().describe('false or absent: only preview the change (a simulation on recent real traffic); true: apply it');
const expectedVersion = z.number().int().positive().optional().describe('The flag version the preview showed; a newer one makes the apply fail (409)');
const range = z.enum(['1h', '24h', '7d', '30d']).optional().describe('Time range, default 24h');

/**
 * The hosted MCP server's tools (docs/mcp.md). Each one is a REST route run in-process for the
 * connector token's principal (RouteInvoker): the same credential policy, validation and gate,
 * so a tool reaches only the consented projects, within the user's role and the connection's
 * scope. Writes go through the flag routes and so through the one flag write path, attributed
 * to the connection (`mcp:<connectionId>`); toggling and targeting changes preview first.
 */
export function buildMcpServer(opts: { invoker: RouteInvoker; caller: Caller; version: string }): McpServer {
  const { invoker, caller } = opts;
  const server = new McpServer({ name: 'feature-flags', version: opts.version });

  const call = (method: Parameters<RouteInvoker['call']>[1], path: string, input: RouteCall) => invoker.call(caller, method, path, input);
  /**
   * A tool's answer: the route's JSON, or its refusal as a tool error the assistant can read. A
   * write refused because the environment needs approval (docs/mcp.md#change-requests) also says
   * how to get it, with the tools: `remedy`, fields added to that refusal.
   */
  const run = async (work: () => Promise<unknown>, remedy: Record<string, unknown> = { next: OPEN_CHANGE_REQUEST }): Promise<CallToolResult> => {
    try {
      return { content: [{ type: 'text', text: JSON.stringify(await work(), null, 2) }] };
    } catch (error) {
      if (!(error instanceof HttpError)) {
        caller.log.error({ err: error }, 'MCP tool failed');
        return { isError: true, content: [{ type: 'text', text: JSON.stringify({ status: 500, error: 'Internal Server Error' }) }] };
      }
      const body: Record<string, unknown> = { status: error.status, ...error.toBody() };
      if (body.code === APPROVAL_REQUIRED) Object.assign(body, remedy);
      return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
    }
  };
  const bodyOf = async (...args: Parameters<typeof call>) => (await call(...args)).body;
  const flagQuery = (a: { serviceId: string; environment: string }) => ({ serviceId: a.serviceId, environment: a.environment });

  server.registerTool(
    'list_projects',
    { description: 'Projects this connection may reach, with your role in each', inputSchema: {}, annotations: { readOnlyHint: true } },
    () => run(() => bodyOf('get', '/api/projects', {})),
  );

  server.registerTool(
    'list_flags',
    {
      description: "A project's flags (paged: limit up to 100, offset)",
      inputSchema: {
        projectId,
        serviceId: serviceId.optional(),
        environment: environment.optional(),
        search: z.string().max(200).optional().describe('Substring of key or name'),
        limit: z.number().int().min(1).max(100).optional(),
        offset: z.number().int().min(0).optional(),
      },
      annotations: { readOnlyHint: true },
    },
    (a) =>
      run(() =>
        bodyOf('get', '/api/flags', {
          query: { projectId: a.projectId, serviceId: a.serviceId, environment: a.environment, search: a.search, limit: a.limit?.toString(), offset: a.offset?.toString() },
        }),
      ),
  );

  server.registerTool('get_flag', { description: "One flag's whole configuration", inputSchema: flagRef, annotations: { readOnlyHint: true } }, (a) =>
    run(() => bodyOf('get', '/api/flags/:key', { params: { key: a.key }, query: flagQuery(a) })),
  );

  const contextArg = z.record(z.unknown()).optional().describe('Evaluation context: targetingKey plus any attributes');
  const explain = (a: { key: string; serviceId: string; environment: string; context?: Record<string, unknown> }) =>
    bodyOf('post', '/api/flags/:key/explain', { params: { key: a.key }, body: { serviceId: a.serviceId, environment: a.environment, context: a.context } }) as Promise<Record<string, unknown>>;
  if (invoker.has('post', '/api/flags/:key/explain')) {
    server.registerTool(
      'evaluate',
      { description: 'What the flag serves for a context (value, reason, rule, variant), evaluated on the snapshot evaluation serves', inputSchema: { ...flagRef, context: contextArg }, annotations: { readOnlyHint: true } },
      (a) =>
        run(async () => {
          const { value, reason, ruleId, variant, errorCode, errorMessage } = await explain(a);
          return { flagKey: a.key, value, reason, ruleId, variant, errorCode, errorMessage };
        }),
    );
    server.registerTool(
      'explain',
      { description: 'Why the flag serves what it serves for a context: each rule reached, each condition with the actual value, rollout buckets', inputSchema: { ...flagRef, context: contextArg }, annotations: { readOnlyHint: true } },
      (a) => run(() => explain(a)),
    );
  }

  const hasSimulate = invoker.has('post', '/api/flags/:key/simulate');
  const simulate = (a: { key: string; serviceId: string; environment: string; cohortSize?: number }, candidateFlag: Record<string, unknown>) =>
    bodyOf('post', '/api/flags/:key/simulate', { params: { key: a.key }, body: { serviceId: a.serviceId, environment: a.environment, cohortSize: a.cohortSize, candidateFlag } });
  const cohortSize = z.number().int().min(1).max(10_000).optional().describe('Recent distinct contexts to replay');
  if (hasSimulate) {
    server.registerTool(
      'simulate',
      {
        description: 'Replay recent real contexts through the current flag and a candidate (enabled, defaultValue, variants, targeting): how many would change, from what to what; writes nothing',
        inputSchema: { ...flagRef, cohortSize, candidateFlag: z.record(z.unknown()).describe('The fields to change: enabled, defaultValue, variants and/or targeting') },
        annotations: { readOnlyHint: true },
      },
      (a) => run(() => simulate(a, a.candidateFlag)),
    );
  }

  /**
   * A write in two steps: without confirm, the current flag and the simulated effect; with
   * confirm, the change applied. `action` names the candidate as a change request's change.
   */
  const previewOrApply = (
    a: { key: string; serviceId: string; environment: string; confirm?: boolean; expectedVersion?: number; cohortSize?: number },
    candidate: Record<string, unknown>,
    action: 'toggle' | 'update',
    apply: () => Promise<unknown>,
  ) =>
    run(async () => {
      if (a.confirm === true) return { applied: true, flag: await apply() };
      const current = (await bodyOf('get', '/api/flags/:key', { params: { key: a.key }, query: flagQuery(a) })) as Record<string, unknown>;
      const simulation = hasSimulate ? await simulate(a, candidate) : null;
      return {
        applied: false,
        current: { enabled: current.enabled, version: current.version, targeting: current.targeting },
        candidate,
        simulation,
        next: 'Nothing was changed. Call again with confirm: true (and expectedVersion) to apply.',
      };
    }, {
      next: `${OPEN_CHANGE_REQUEST} changeRequestChange is the entry of its changes that asks for this write.`,
      changeRequestChange: { serviceId: a.serviceId, environment: a.environment, flagKey: a.key, action, body: candidate, baseVersion: a.expectedVersion },
    });

  server.registerTool(
    'toggle_flag',
    {
      description: 'Turn a flag on or off (needs a write connection). First call without confirm: a preview with the simulated effect; then confirm: true applies it',
      inputSchema: { ...flagRef, enabled: z.boolean(), confirm, expectedVersion, cohortSize },
      annotations: { destructiveHint: true },
    },
    (a) =>
      previewOrApply(a, { enabled: a.enabled }, 'toggle', () =>
        bodyOf('post', '/api/flags/:key/toggle', { params: { key: a.key }, query: flagQuery(a), body: { enabled: a.enabled, version: a.expectedVersion } }),
      ),
  );

  server.registerTool(
    'update_targeting',
    {
      description: "Replace a flag's targeting rules (needs a write connection). First call without confirm: a preview with the simulated effect; then confirm: true applies it",
      inputSchema: { ...flagRef, targeting: z.array(TargetingRuleInputSchema).max(1000), confirm, expectedVersion, cohortSize },
      annotations: { destructiveHint: true },
    },
    (a) =>
      previewOrApply(a, { targeting: a.targeting }, 'update', () =>
        bodyOf('patch', '/api/flags/:key', { params: { key: a.key }, query: flagQuery(a), body: { targeting: a.targeting, version: a.expectedVersion } }),
      ),
  );

  const report = (path: string) => (a: { key: string; serviceId: string; environment: string; range?: string }) =>
    run(() => bodyOf('get', path, { params: { key: a.key }, query: { ...flagQuery(a), range: a.range } }));
  server.registerTool(
    'flag_metrics',
    { description: 'Evaluation metrics of a flag: volume, errors, latency percentiles, breakdowns, time series', inputSchema: { ...flagRef, range }, annotations: { readOnlyHint: true } },
    report('/api/flags/:key/metrics'),
  );
  server.registerTool(
    'toggle_impact',
    { description: 'Errors and latency before and after the latest toggle in the range, with a verdict', inputSchema: { ...flagRef, range }, annotations: { readOnlyHint: true } },
    report('/api/flags/:key/toggle-impact'),
  );

  server.registerTool(
    'canary_status',
    { description: "The flag's canary pipeline: stages, gates and their statistics", inputSchema: flagRef, annotations: { readOnlyHint: true } },
    (a) => run(() => bodyOf('get', '/api/flags/:key/canary', { params: { key: a.key }, query: flagQuery(a) })),
  );
  server.registerTool(
    'canary_start',
    {
      description: 'Start a canary pipeline ramping the flag with statistical gates (needs a write connection)',
      inputSchema: {
        ...flagRef,
        initialRolloutPercent: z.number().gt(0).max(100),
        targetRolloutPercent: z.number().gt(0).max(100),
        rampStepPercent: z.number().gt(0).max(100),
        soakPeriodMinutes: z.number().min(0.05).max(10_080),
        errorRateGateDelta: z.number().min(0).max(1).describe('Tolerated rise of the error rate (0-1)'),
        latencyGateDeltaMs: z.number().min(0).max(600_000),
        autoRollbackOnBreach: z.boolean(),
        minSamplesPerCohort: z.number().int().min(1).optional(),
        ruleId: z.string().min(1).max(256).optional().describe('An existing rule to ramp; without it a rule `canary` is inserted'),
        changeRequestId: idSchema.optional().describe('Where the change policy needs approval: an approved change request of this flag'),
      },
    },
    ({ key: flagKey, ...body }) =>
      run(() => bodyOf('post', '/api/flags/:key/canary', { params: { key: flagKey }, body }), {
        next: 'This environment needs approval: nothing was started. Open a change request of this flag with create_change_request, have an approver approve it, then call canary_start again with its id as changeRequestId.',
      }),
  );
  server.registerTool(
    'canary_abort',
    { description: "Abort the flag's running canary pipeline (needs a write connection)", inputSchema: { ...flagRef, reason: z.string().min(1).max(1000) }, annotations: { destructiveHint: true } },
    ({ key: flagKey, ...body }) => run(() => bodyOf('post', '/api/flags/:key/canary/abort', { params: { key: flagKey }, body })),
  );

  const requestRef = { projectId, requestId: idSchema.describe('A change request id (from list_change_requests)') };
  const requestPath = '/api/projects/:id/change-requests/:requestId';
  const requestParams = (a: { projectId: string; requestId: string }) => ({ id: a.projectId, requestId: a.requestId });
  const decide = (path: string) => (a: { projectId: string; requestId: string; comment?: string }) =>
    run(() => bodyOf('post', path, { params: requestParams(a), body: { comment: a.comment } }));

  server.registerTool(
    'create_change_request',
    {
      description:
        'Open a change request: flag changes, in environments whose change policy needs approval, reviewed and applied as one (needs a write connection). ' +
        'It applies only once approved, with apply_change_request; the answer shows the approvals needed and the simulated impact',
      inputSchema: { projectId, ...ChangeRequestCreateSchema.shape },
    },
    ({ projectId: id, ...body }) => run(() => bodyOf('post', '/api/projects/:id/change-requests', { params: { id }, body })),
  );
  server.registerTool(
    'list_change_requests',
    {
      description: "A project's change requests, newest first (paged: limit up to 100, offset)",
      inputSchema: {
        projectId,
        status: z.enum(CHANGE_REQUEST_STATUSES).optional(),
        limit: z.number().int().min(1).max(100).optional(),
        offset: z.number().int().min(0).optional(),
      },
      annotations: { readOnlyHint: true },
    },
    ({ projectId: id, ...a }) =>
      run(() => bodyOf('get', '/api/projects/:id/change-requests', { params: { id }, query: { status: a.status, limit: a.limit?.toString(), offset: a.offset?.toString() } })),
  );
  server.registerTool(
    'get_change_request',
    {
      description: 'One change request: its changes, approvals, simulated impact, conflicts (flags changed since it was opened) and the actions open to you',
      inputSchema: requestRef,
      annotations: { readOnlyHint: true },
    },
    (a) => run(() => bodyOf('get', requestPath, { params: requestParams(a) })),
  );
  // Its limits are the routes' to check.
  const comment = z.string();
  server.registerTool(
    'approve_change_request',
    {
      description: "Approve a change request as yourself (needs a write connection and a role the project's change policy names; not your own request unless the policy allows it)",
      inputSchema: { ...requestRef, comment: comment.optional() },
    },
    decide(`${requestPath}/approve`),
  );
  server.registerTool(
    'reject_change_request',
    {
      description: 'Reject a change request, for good, with the reason (same rule as approving)',
      inputSchema: { ...requestRef, comment: comment.describe('Why') },
      annotations: { destructiveHint: true },
    },
    decide(`${requestPath}/reject`),
  );
  server.registerTool(
    'apply_change_request',
    {
      description:
        'Apply an approved change request, all of its changes at once (needs a write connection). First call without confirm: the request with its simulated impact and conflicts; then confirm: true applies it',
      inputSchema: { ...requestRef, confirm: z.boolean().optional().describe('false or absent: only show what would apply; true: apply it') },
      annotations: { destructiveHint: true },
    },
    (a) =>
      run(async () => {
        if (a.confirm === true) return { applied: true, changeRequest: await bodyOf('post', `${requestPath}/apply`, { params: requestParams(a) }) };
        const request = (await bodyOf('get', requestPath, { params: requestParams(a) })) as Record<string, unknown>;
        return {
          applied: false,
          changeRequest: request,
          next: 'Nothing was changed. Call again with confirm: true to apply (a flag changed since the request was opened makes it fail with 409, and the request ends failed).',
        };
      }),
  );

  server.registerTool(
    'audit_search',
    {
      description: "Search a project's audit trail, newest first",
      inputSchema: {
        projectId,
        action: z.string().max(100).optional().describe('e.g. flag.updated'),
        resourceType: z.string().max(100).optional(),
        resourceId: z.string().max(200).optional(),
        startDate: z.string().max(40).optional().describe('ISO 8601'),
        endDate: z.string().max(40).optional().describe('ISO 8601'),
        limit: z.number().int().min(1).max(100).optional(),
      },
      annotations: { readOnlyHint: true },
    },
    (a) => run(() => bodyOf('get', '/api/audit', { query: { ...a, limit: a.limit?.toString() } })),
  );

  return server;
}

/** What a write refused for approval tells the assistant to do instead. */
const OPEN_CHANGE_REQUEST =
  "This environment needs approval: nothing was changed. Open a change request with create_change_request (projectId: the flag's, from get_flag), " +
  'have an approver approve it (approve_change_request), then apply it with apply_change_request.';
