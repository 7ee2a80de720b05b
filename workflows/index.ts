// Every workflow the worker registers. Workflows import activities by type only.
export { sendMail } from './mail';
export { invitationExpiry } from './invitation-expiry';
export { deliverOutbound } from './webhook-delivery';
export { deliveryLane } from './delivery-lane';
export { guardrailWatch } from './guardrail';
export { canaryPipeline } from './canary';
export { banditReallocation } from './bandit';
export { scheduledChange } from './scheduled-change';
