import { createBanditActivities, type BanditDeps } from './bandit';
import { createCanaryActivities, type CanaryDeps } from './canary';
import { createChangeRequestActivities, type ChangeRequestDeps } from './change-requests';
import { createDeliveryActivities, type DeliveryDeps } from './delivery';
import { createGuardrailActivities, type GuardrailDeps } from './guardrail';
import { createInvitationActivities, type InvitationDeps } from './invitations';
import { createMailActivities, type MailDeps } from './mail';

/** Everything activities need, passed in by the worker's wiring. */
export type ActivityDeps = MailDeps & InvitationDeps & DeliveryDeps & GuardrailDeps & CanaryDeps & BanditDeps & ChangeRequestDeps;

export function createActivities(deps: ActivityDeps) {
  return {
    ...createMailActivities(deps),
    ...createInvitationActivities(deps),
    ...createDeliveryActivities(deps),
    ...createCanaryActivities(deps),
    ...createGuardrailActivities(deps),
    ...createBanditActivities(deps),
    ...createChangeRequestActivities(deps),
  };
}
