import { z } from 'zod';
import { EnvironmentSchema } from './environments';

/**
 * A bound project token's service and environment (docs/api-reference.md#project-api-tokens):
 * the token record shows it and the authenticated principal carries it.
 */
export const TokenBindingSchema = z
  .object({ serviceId: z.string().min(1).max(128), environment: EnvironmentSchema })
  .strict()
  .describe('Bound token: reads only this service and environment, on evaluation and SDK routes');
export type TokenBinding = z.infer<typeof TokenBindingSchema>;
