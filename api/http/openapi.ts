import { OpenAPIRegistry, OpenApiGeneratorV31, extendZodWithOpenApi, type ResponseConfig } from '@asteasolutions/zod-to-openapi';
import { z, type ZodTypeAny } from 'zod';
import type { AnyDeclaration } from './route';

extendZodWithOpenApi(z);

const ErrorEnvelope = z
  .object({
    error: z.string(),
    message: z.string(),
    details: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .passthrough();

/** Every error answer is the envelope of docs/errors.md; each status says where its rules are. */
const ERROR_STATUSES: Record<number, string> = {
  400: 'Invalid parameters or validation failure; `details` lists every problem (docs/errors.md)',
  401: 'Missing or invalid authentication (docs/api-reference.md#credentials)',
  403: 'Insufficient permission (docs/errors.md#permission-messages)',
  404: 'Not found, or a resource the caller cannot see',
  409: 'Conflict',
  410: 'Gone (a single-use resource already used, cancelled or expired)',
  413: 'Request body too large (docs/limits.md#request-sizes)',
  415: 'Unsupported media type, or a compressed body (no Content-Encoding is accepted)',
  429: 'Rate limited (docs/limits.md#rate-limits)',
  500: 'Internal error',
  503: 'Service unavailable: a backend the request needs is down (docs/errors.md)',
};

/** The document's introduction: where the rules that no schema carries are written down. */
const API_DESCRIPTION = [
  'Feature flags: management on the control plane, evaluation on the data plane (REST, OFREP, Connect, gRPC-Web, SSE).',
  '',
  'The schemas here are generated from the validators the routes use. The rules they do not carry are in the repository:',
  '',
  '- `docs/api-reference.md`: addresses, profiles, credentials, CSRF, roles and capabilities, tokens, the demo service, webhooks, triggers, outcome events, OAuth and CLI login.',
  '- `docs/evaluation.md`: evaluation order, reasons, operators, bucketing and evaluation error codes.',
  '- `docs/limits.md`: rate limits, request sizes, batch and page sizes, stream caps, lifetimes.',
  '- `docs/errors.md`: the error envelope `{error, message, details?}` of every non-2xx answer, the statuses, permission messages and codes.',
  '',
  'Authenticate with `Authorization: Bearer <token>` (project API token, personal access token or connector token) or a dashboard session cookie; cookie-session mutations also send `X-CSRF-Token` from `GET /api/csrf-token`.',
].join('\n');

/** Collects every mounted route, so /api/openapi.json documents exactly what validates requests. */
export class OpenApiCatalog {
  private readonly registry = new OpenAPIRegistry();
  private readonly seen = new Set<string>();
  /** operationId -> the operation that has it. */
  private readonly operationIds = new Map<string, string>();
  private cached?: object;

  constructor(private readonly info: { title: string; version: string }) {
    this.registry.registerComponent('securitySchemes', 'bearerAuth', { type: 'http', scheme: 'bearer' });
    this.registry.registerComponent('securitySchemes', 'sessionCookie', { type: 'apiKey', in: 'cookie', name: 'flags_session' });
  }

  register(route: AnyDeclaration): void {
    const path = route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const id = `${route.method} ${path}`;
    if (this.seen.has(id)) return;
    this.seen.add(id);
    const operationId = operationIdOf(route.method, path);
    const other = this.operationIds.get(operationId);
    if (other !== undefined) throw new Error(`${id} and ${other} would share the operationId ${operationId}`);
    this.operationIds.set(operationId, id);
    this.cached = undefined;
    const status = route.status ?? 200;
    const responses: Record<string, ResponseConfig> = {
      [status]: route.response
        ? { description: 'Success', content: { 'application/json': { schema: route.response } } }
        : { description: 'Success' },
    };
    for (const [code, description] of Object.entries(ERROR_STATUSES)) {
      responses[code] = { description, content: { 'application/json': { schema: ErrorEnvelope } } };
    }
    this.registry.registerPath({
      method: route.method,
      path,
      operationId,
      summary: route.summary,
      tags: route.tags,
      security: route.auth === 'public' ? [{}, { bearerAuth: [] }, { sessionCookie: [] }] : [{ bearerAuth: [] }, { sessionCookie: [] }],
      request: {
        params: asObject(route.params),
        query: asObject(route.query),
        body: route.body ? { content: { 'application/json': { schema: route.body } }, required: false } : undefined,
      },
      responses,
    });
  }

  document(): object {
    this.cached ??= new OpenApiGeneratorV31(this.registry.definitions).generateDocument({
      openapi: '3.1.0',
      info: { ...this.info, description: API_DESCRIPTION },
      servers: [{ url: '/' }],
    });
    return this.cached;
  }
}

/**
 * The operation's stable id, derived from its method and path so that every client generator
 * names one method per operation and the name changes only with the route:
 * `get /api/flags/{key}/versions` -> `getFlagsByKeyVersions`.
 */
export function operationIdOf(method: string, path: string): string {
  const words = path
    .replace(/^\/api\//, '/')
    .split('/')
    .filter(Boolean)
    .map((segment) => {
      const param = /^\{(.+)\}$/.exec(segment);
      return (param ? `by-${param[1]}` : segment)
        .split(/[^A-Za-z0-9]+/)
        .filter(Boolean)
        .map((word) => word[0].toUpperCase() + word.slice(1))
        .join('');
    });
  return method + words.join('');
}

function asObject(schema: ZodTypeAny | undefined): z.AnyZodObject | undefined {
  if (!schema) return undefined;
  if (schema instanceof z.ZodObject) return schema;
  if (schema instanceof z.ZodEffects) return asObject(schema.innerType());
  return undefined;
}
