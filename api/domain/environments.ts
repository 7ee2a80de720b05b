import { z } from 'zod';

/**
 * The environments every project has, in their promotion order. Workflow code imports this
 * module too (the Temporal sandbox bundle), so it imports nothing but zod.
 */
export const ENVIRONMENTS = ['development', 'staging', 'production'] as const;
export const EnvironmentSchema = z.enum(ENVIRONMENTS);
export type Environment = z.infer<typeof EnvironmentSchema>;
