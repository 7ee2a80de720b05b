import { z } from 'zod';
import { EnvironmentSchema } from '../../domain/environments';
import { text } from '../projects/common';

/** One environment's copy of a found flag: what an on-call engineer checks before acting. */
export const FlagEnvironmentStateSchema = z.object({
  environment: EnvironmentSchema,
  enabled: z.boolean(),
  version: z.number().int(),
});

/** A flag found by the global search: one service's key, with the state of every environment holding it. */
export const FlagSearchResultSchema = z.object({
  projectId: z.string(),
  projectName: z.string(),
  serviceId: z.string(),
  serviceName: z.string(),
  key: z.string(),
  name: z.string(),
  environments: z.array(FlagEnvironmentStateSchema).describe('In the order development, staging, production; only the environments holding the flag'),
});
export type FlagSearchResult = z.infer<typeof FlagSearchResultSchema>;

/** Limits of GET /api/search/flags (docs/api-reference.md#global-flag-search). */
export const SEARCH_QUERY_MAX = 100;
export const SEARCH_LIMIT_MAX = 50;

export const FlagSearchQuerySchema = z.object({
  q: text(SEARCH_QUERY_MAX)
    .pipe(z.string().trim().min(1, 'must not be empty'))
    .describe('Case-insensitive substring of the key or name; % and _ match themselves'),
  limit: z.coerce.number().int().min(1).max(SEARCH_LIMIT_MAX).default(20),
});
export type FlagSearchQuery = z.infer<typeof FlagSearchQuerySchema>;
