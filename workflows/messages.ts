import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { z } from 'zod';
import {
  CanaryConfigSchema,
  CanaryTargetSchema,
  type CanaryConfig,
  type CanaryGate,
  type CanaryStage,
  type CanaryState,
  type CanaryStatus,
  type CanaryTarget,
} from '../api/domain/canary';

/**
 * Everything that crosses a workflow's boundary: each workflow's registered name, input and
 * result, its signals and updates, and the activities it calls. Workflows (inside Temporal's
 * sandbox bundle), activities and the code that starts workflows (api/) all import it; it
 * imports none of them, so no workflow module reaches client or driver code.
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

// ---------------------------------------------------------------------------------------------
// canaryPipeline: one workflow per flag, service and environment ramping a rule's rollout
// through gated stages (workflows/canary.ts; docs/canary.md). The shapes are the API's record
// (api/domain/canary.ts).

const CanaryPipelineInputSchema = z
  .object({
    pipelineId: z.string().min(1),
    target: CanaryTargetSchema,
    ruleId: z.string().min(1),
    /** JSON text of the value of the rule the pipeline inserts first (no ruleId given); absent when ramping an existing rule. */
    insertRuleValue: z.string().optional(),
    config: CanaryConfigSchema,
    preCanaryVersion: z.number().int().min(1),
    /** History events after which the workflow continues as new at the next stage boundary (default 5,000). */
    historyLimit: z.number().int().min(10).optional(),
  })
  // `resume` is never a start's input: only continue-as-new passes it, past this check.
  .strict();

export type CanaryPipelineInput = z.infer<typeof CanaryPipelineInputSchema> & {
  /** The state carried over by continue-as-new. */
  resume?: CanaryState;
};

export const CANARY_PIPELINE = workflowMessage<CanaryPipelineInput, CanaryStatus>('canaryPipeline', CanaryPipelineInputSchema);

/**
 * Sent with the start (update-with-start): answers the state once the first stage's rollout is
 * in the flag, or the pipeline ended before it could be.
 */
export const canaryFirstStageUpdate = defineUpdate<CanaryState>('canaryFirstStage');

/** Operator advance: `force` skips the soak and gate; otherwise the API ran the gate and sends its passing result. */
export interface CanaryAdvance {
  force: boolean;
  requestedBy: string;
  gate?: CanaryGate;
}
/** Ends the current stage; answers the state once the next stage started or the pipeline ended. */
export const canaryAdvanceUpdate = defineUpdate<CanaryState, [CanaryAdvance]>('canaryAdvance');

export interface CanaryAbort {
  reason: string;
  requestedBy: string;
}
/** Restores the pre-canary flag content and ends the pipeline; answers the ended state. */
export const canaryAbortUpdate = defineUpdate<CanaryState, [CanaryAbort]>('canaryAbort');

/** The failure type of an advance or abort the pipeline refuses in its present state; the message says why. */
export const CANARY_REFUSED = 'CanaryRefused';

export const canaryStateQuery = defineQuery<CanaryState>('canaryState');

/** The Temporal workflow id of a flag's pipeline: one per flag, service and environment. */
export function canaryWorkflowId(serviceId: string, environment: string, flagKey: string): string {
  return `canary:${serviceId}:${environment}:${flagKey}`;
}

export interface CanaryRolloutStep {
  pipelineId: string;
  target: CanaryTarget;
  ruleId: string;
  insertRuleValue?: string;
  stageIndex: number;
  rolloutPercent: number;
  /** The gate that let the previous stage end (audit evidence), or who forced it. */
  previousGate?: CanaryGate;
  forcedBy?: string;
}

export interface CanaryGateRequest {
  target: CanaryTarget;
  ruleId: string;
  fromMs: number;
  toMs: number;
  rolloutPercent: number;
  config: CanaryConfig;
  final: boolean;
}

export interface CanaryRestore {
  pipelineId: string;
  target: CanaryTarget;
  preCanaryVersion: number;
  outcome: 'rolled_back' | 'aborted';
  reason: string;
  requestedBy?: string;
  gate?: CanaryGate;
}

/** The failure type of a canary activity whose flag or rule is gone (not retried; the workflow stops). */
export const CANARY_TARGET_GONE = 'CanaryTargetGone';

export interface CanaryActivities {
  /** Sets the rule's rolloutPercentage (inserting the `canary` rule first when asked) through FlagService; the new flag version. */
  applyCanaryRollout(step: CanaryRolloutStep): Promise<number>;
  /** Reads both cohorts of the window from the warehouse and runs the gate. */
  evaluateCanaryGate(request: CanaryGateRequest): Promise<CanaryGate>;
  /** Restores the pre-canary flag content as a new version, with the evidence in its audit entry. */
  restoreCanaryFlag(restore: CanaryRestore): Promise<number>;
  /** Alerts the organization's channels about a breach rollback; how many channels were notified. */
  notifyCanaryRollback(pipelineId: string, target: CanaryTarget, gate: CanaryGate, stage: CanaryStage): Promise<number>;
  /** Writes the workflow's state to the pipeline record (idempotent: the whole state each time). */
  saveCanaryState(pipelineId: string, state: CanaryState): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// guardrailWatch: the watch after one production change of a flag (workflows/guardrail.ts,
// docs/guardrails.md). One per (flag, version): the id makes a redelivered outbox event start
// nothing twice.

export interface GuardrailCheckInput {
  flagId: string;
  /** The version the change produced: the only one the watch judges. */
  version: number;
  /** Minutes compared before and after the change (the project's guardrailWindowMinutes). */
  windowMinutes: number;
  /** The watch's last check: a `waiting` verdict is final here, so the people on call hear of it. */
  lastCheck?: boolean;
}

export interface GuardrailWatchInput extends GuardrailCheckInput {
  /** ISO time the change committed (the outbox event's timestamp). */
  changedAt: string;
}

/**
 * `passed`: not tripped (including too little data after the change); `tripped`: tripped but not
 * rolled back (the project's automatic rollback is off, or the flag moved on while judged);
 * `rolled_back`; `superseded`: a newer change came first and is the one judged; `flag_deleted`;
 * `waiting`: not tripped, but a Prometheus guard could not be judged (never a pass: checked again).
 */
export const GUARDRAIL_VERDICTS = ['passed', 'waiting', 'tripped', 'rolled_back', 'superseded', 'flag_deleted'] as const;
export type GuardrailVerdict = (typeof GUARDRAIL_VERDICTS)[number];

export interface GuardrailCheckResult {
  verdict: GuardrailVerdict;
  reason: string;
}

export const GUARDRAIL_WATCH = workflowMessage<GuardrailWatchInput, GuardrailCheckResult>(
  'guardrailWatch',
  z
    .object({
      flagId: z.string().min(1),
      version: z.number().int().min(1),
      windowMinutes: z.number().int().min(1).max(1_440),
      changedAt: z.string().datetime(),
    })
    .strict(),
);

export const guardrailWatchId = (flagId: string, version: number) => `guardrail-${flagId}-v${version}`;

export interface GuardrailActivities {
  /** Judges the watched version like the auto-rollback endpoint and records the verdict. */
  checkGuardrail(input: GuardrailCheckInput): Promise<GuardrailCheckResult>;
}

const GUARDRAIL_MINUTE_MS = 60_000;
/** Time after the judged window for buffered evaluation events to land (the writers flush every 5 s). */
export const GUARDRAIL_SETTLE_MS = 30_000;

/**
 * When the watch judges: once the after-window of the change is complete. That window starts at
 * the change's millisecond (api/features/insights/window.ts aroundChange), so the first minute
 * after the change is judged too, and lasts `windowMinutes`.
 */
export function guardrailCheckAt(changedAtMs: number, windowMinutes: number): number {
  return changedAtMs + windowMinutes * GUARDRAIL_MINUTE_MS + GUARDRAIL_SETTLE_MS;
}

// ---------------------------------------------------------------------------------------------
// banditReallocation: one workflow per bandit experiment, reallocating on its interval
// (workflows/bandit.ts; docs/experiments.md).

/** Reallocation interval bounds (minutes): at least a minute, at most a week. */
export const REALLOCATION_INTERVAL = { min: 1, max: 10_080, default: 15 } as const;

/** Rounds one workflow run sleeps and reallocates before it continues as new (bounded history). */
export const BANDIT_ROUNDS_PER_RUN = 100;

export interface BanditReallocationInput {
  experimentId: string;
  intervalMinutes: number;
  /** Rounds before continue-as-new; default BANDIT_ROUNDS_PER_RUN (tests set fewer). */
  roundsPerRun?: number;
}

/** How a round left the experiment: still running, ended (completed or stopped), or gone (deleted with its flag). */
export type BanditRoundOutcome = 'running' | 'completed' | 'stopped' | 'gone';
export type BanditWorkflowResult = Exclude<BanditRoundOutcome, 'running'>;

export const BANDIT_REALLOCATION = workflowMessage<BanditReallocationInput, BanditWorkflowResult>(
  'banditReallocation',
  z
    .object({
      experimentId: z.string().min(1),
      intervalMinutes: z.number().finite().min(REALLOCATION_INTERVAL.min).max(REALLOCATION_INTERVAL.max),
      roundsPerRun: z.number().int().min(1).max(10_000).optional(),
    })
    .strict(),
);

/** Sent when the experiment ended outside the workflow (stopped, or completed by a manual reallocation), with how: it returns at once. */
export const banditEndedSignal = defineSignal<['completed' | 'stopped']>('banditEnded');

export const banditWorkflowId = (experimentId: string) => `bandit:${experimentId}`;

export interface BanditActivities {
  /** One scheduled reallocation round of the experiment (api/features/experiments/reallocation.ts). */
  reallocateBandit(experimentId: string): Promise<BanditRoundOutcome>;
}

// ---------------------------------------------------------------------------------------------
// scheduledChange: one workflow per scheduled change request (workflows/scheduled-change.ts)

export interface ScheduledChangeInput {
  requestId: string;
  /** When to apply, ISO 8601. */
  at: string;
}
export const SCHEDULED_CHANGE = workflowMessage<ScheduledChangeInput, ScheduledChangeResult>(
  'scheduledChange',
  z.object({ requestId: z.string().min(1), at: z.string().datetime({ offset: true }) }),
);
/** `applied` or `failed` at the time; `skipped` when the request no longer wanted that time; `cancelled` by signal. */
export type ScheduledChangeResult = 'applied' | 'failed' | 'skipped' | 'cancelled';
/** A new time: the timer restarts for it (the request's row already says it). */
export const rescheduleChangeSignal = defineSignal<[string]>('rescheduleChange');
export const cancelScheduledChangeSignal = defineSignal('cancelScheduledChange');

export function scheduledChangeWorkflowId(requestId: string): string {
  return `change-request-${requestId}`;
}

export interface ScheduledChangeActivities {
  /** Applies the request if it is still scheduled for `at` (idempotent: an applied one answers `skipped`). */
  fireScheduledChange(input: ScheduledChangeInput): Promise<Exclude<ScheduledChangeResult, 'cancelled'>>;
}
