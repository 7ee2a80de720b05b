import { createMailActivities, type MailDeps } from './mail';

/** Everything activities need, passed in by the worker's wiring. */
export type ActivityDeps = MailDeps;

export function createActivities(deps: ActivityDeps) {
  return {
    ...createMailActivities(deps),
  };
}
