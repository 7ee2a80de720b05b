import { defineSignal } from '@temporalio/workflow';
import { z } from 'zod';

/**
 * Everything that crosses a workflow's boundary: each workflow's registered name, input and
 * result, its signals, and the activities it calls. Workflows (inside Temporal's sandbox
 * bundle), activities and the code that starts workflows (api/) all import it; it imports
 * none of them, so no workflow module reaches client or driver code.
 *
 * Inputs are zod schemas, checked by startWorkflow (api/infra/temporal.ts) before a start
 * reaches Temporal: a bad input fails the caller, with the caller's stack, instead of
 * becoming a started workflow. The workflows do not parse again: zod does bundle into the
 * sandbox, but a ZodError thrown there would fail workflow tasks, retried without end.
 */

/** A workflow as its starters see it. */
export interface WorkflowMessage<Input, Result> {
  /** The name workflows/index.ts exports it under. */
  readonly name: string;
  readonly input: z.ZodType<Input, z.ZodTypeDef, unknown>;
  /** Never set: carries the result type to typed starts. */
  readonly result?: Result;
}

function workflowMessage<Input, Result>(name: string, input: z.ZodType<Input, z.ZodTypeDef, unknown>): WorkflowMessage<Input, Result> {
  return { name, input };
}

// ---------------------------------------------------------------------------------------------
// sendMail: one workflow per stored message (workflows/mail.ts)

/** The id of the outgoing_mail row, also the workflow id; the message itself stays out of the history. */
export type SendMailInput = string;
export const SEND_MAIL = workflowMessage<SendMailInput, void>('sendMail', z.string().min(1));

export interface MailActivities {
  deliverMail(mailId: string): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// invitationExpiry: the 7-day timer of one invitation (workflows/invitation-expiry.ts)

export interface InvitationExpiryInput {
  invitationId: string;
}
export type InvitationExpiryResult = 'settled' | 'expired';
export const INVITATION_EXPIRY = workflowMessage<InvitationExpiryInput, InvitationExpiryResult>(
  'invitationExpiry',
  z.object({ invitationId: z.string().min(1) }).strict(),
);

/** Sent on accept or cancel: the invitation is settled and the timer is no longer needed. */
export const invitationSettledSignal = defineSignal('settled');

export interface InvitationActivities {
  /** Marks a still-pending invitation expired; whether this call expired it. */
  expireInvitation(invitationId: string): Promise<boolean>;
}

// ---------------------------------------------------------------------------------------------
// deliverOutbound: one stored webhook or alert delivery (workflows/webhook-delivery.ts)

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'skipped';
export type AttemptOutcome = 'delivered' | 'retry' | 'failed' | 'skipped';

/** What one attempt produced; returned by the attempt activity, stored by the record activity. */
export interface AttemptResult {
  outcome: AttemptOutcome;
  statusCode: number | null;
  error: string | null;
  durationMs: number | null;
  startedAt: string;
}

export interface DeliverOutboundInput {
  deliveryId: string;
  maxAttempts?: number;
}

export interface DeliverOutboundResult {
  status: Exclude<DeliveryStatus, 'pending'>;
  attempts: number;
  statusCode: number | null;
  error: string | null;
}

export const DELIVER_OUTBOUND = workflowMessage<DeliverOutboundInput, DeliverOutboundResult>(
  'deliverOutbound',
  z.object({ deliveryId: z.string().min(1), maxAttempts: z.number().int().optional() }).strict(),
);

export interface DeliveryActivities {
  attemptOutboundDelivery(deliveryId: string, attempt: number): Promise<AttemptResult>;
  recordOutboundAttempt(deliveryId: string, attempt: number, result: AttemptResult, finalStatus: DeliveryStatus | null): Promise<void>;
  /** One attempt and its bookkeeping in one activity: half the activity tasks per delivery. */
  attemptAndRecordDelivery(deliveryId: string, attempt: number, maxAttempts: number): Promise<RecordedAttempt>;
}

export interface RecordedAttempt {
  result: AttemptResult;
  finalStatus: Exclude<DeliveryStatus, 'pending'> | null;
}

/** Whether an attempt's outcome ends its delivery, and how: a retryable one ends it only on the last attempt. */
export function finalStatusOf(outcome: AttemptOutcome, attempt: number, maxAttempts: number): RecordedAttempt['finalStatus'] {
  if (outcome !== 'retry') return outcome;
  return attempt >= maxAttempts ? 'failed' : null;
}

// ---------------------------------------------------------------------------------------------
// deliveryLane: one long-lived workflow per delivery target (webhook or alert channel) draining a
// queue of stored deliveries (workflows/delivery-lane.ts). A burst of changes costs one signal
// per dispatched batch instead of one workflow start per delivery.

export interface QueuedDelivery {
  deliveryId: string;
  maxAttempts: number;
}

const queuedDelivery = z.object({ deliveryId: z.string().min(1), maxAttempts: z.number().int().min(1) }).strict();

export interface DeliveryLaneInput {
  /** Deliveries carried over from the previous run (continue-as-new), in queue order. */
  pending: QueuedDelivery[];
}

export const DELIVERY_LANE = workflowMessage<DeliveryLaneInput, void>(
  'deliveryLane',
  z.object({ pending: z.array(queuedDelivery) }).strict(),
);

/** The dispatcher's hand-over: deliveries already stored as pending, in the order to run them. */
export const deliveriesQueuedSignal = defineSignal<[QueuedDelivery[]]>('deliveriesQueued');
export const DELIVERIES_QUEUED_ARGS = z.array(queuedDelivery).min(1);
