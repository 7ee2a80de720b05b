import { z } from 'zod';

/**
 * External guards of a canary pipeline or the production guardrail (docs/canary.md#prometheus-guards):
 * a Prometheus query judged at every gate. The workflow bundle includes it, so like all of
 * api/domain/ it imports nothing but zod.
 */

export const MAX_GUARDS = 5;
export const MAX_GUARD_QUERY_LENGTH = 2_000;
export const MAX_GUARD_URL_LENGTH = 2_048;

export const PrometheusGuardSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/, 'letters, digits, space, ".", "_" and "-", 1-64 characters'),
    source: z.literal('prometheus'),
    url: z
      .string()
      .max(MAX_GUARD_URL_LENGTH)
      .url()
      .refine((u) => /^https?:\/\//i.test(u), 'must be an http or https URL')
      // Records are readable with flags:read: no secrets in them. The query endpoint is appended to the path.
      .refine((u) => !/^https?:\/\/[^/?#]*@/i.test(u), 'must not contain credentials')
      .refine((u) => !/[?#]/.test(u), 'must not have a query string or fragment')
      .describe('Base URL of the Prometheus server; the check calls <url>/api/v1/query'),
    query: z.string().min(1).max(MAX_GUARD_QUERY_LENGTH).describe('PromQL, templated with {{flagKey}}, {{environment}}, {{serviceId}}, {{stageStart}}, {{window}}'),
    failWhen: z.object({ op: z.enum(['>', '<']), threshold: z.number().finite() }).strict(),
  })
  .strict();
export type PrometheusGuard = z.infer<typeof PrometheusGuardSchema>;

export const GuardsSchema = z
  .array(PrometheusGuardSchema)
  .max(MAX_GUARDS)
  .superRefine((guards, ctx) => {
    const seen = new Set<string>();
    guards.forEach((g, i) => {
      if (seen.has(g.name)) ctx.addIssue({ code: z.ZodIssueCode.custom, path: [i, 'name'], message: `another guard is named "${g.name}"` });
      seen.add(g.name);
    });
  });

/** One guard's answer at a gate: `wait` whenever the query cannot be judged (no data, an error, an unreachable server). */
export const GuardResultSchema = z.object({
  name: z.string(),
  decision: z.enum(['pass', 'fail', 'wait']),
  reason: z.string(),
  /** The query's value, when it answered one. */
  value: z.number().nullable(),
});
export type GuardResult = z.infer<typeof GuardResultSchema>;
