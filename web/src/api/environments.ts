/** The environments the API knows (its environment enum in the generated schema.d.ts), in one order. */
import type { paths } from './client';

export type Environment = NonNullable<NonNullable<paths['/api/flags/{key}']['get']['parameters']['query']>['environment']>;

/** Promotion order; a Record, so an environment added to the API fails to compile until it is placed here. */
const PROMOTION: Record<Environment, number> = { development: 0, staging: 1, production: 2 };

/** Development, staging, production. */
export const ENVIRONMENTS: readonly Environment[] = (Object.keys(PROMOTION) as Environment[]).sort((a, b) => PROMOTION[a] - PROMOTION[b]);

/** For pickers about releases, where production is the usual choice: production, staging, development. */
export const PRODUCTION_FIRST: readonly Environment[] = [...ENVIRONMENTS].reverse();

export const isEnvironment = (value: unknown): value is Environment => typeof value === 'string' && value in PROMOTION;
