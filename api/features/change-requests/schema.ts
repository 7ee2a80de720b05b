import { z } from 'zod';
import { ENVIRONMENTS, EnvironmentSchema } from '../../domain/environments';
import { FlagCreateSchema, FlagKeySchema, FlagPatchSchema, FlagToggleSchema } from '../flags/schema';

/**
 * Change policy and change requests as one set of zod schemas (docs/change-requests.md): the
 * routes validate and document with them, the types below are inferred from them, the store
 * reads and writes their shapes.
 */

export const APPROVER_ROLES = ['owner', 'admin', 'member'] as const;
export type ApproverRole = (typeof APPROVER_ROLES)[number];

export const EnvironmentPolicySchema = z
  .object({
    requiredApprovals: z.number().int().min(0).max(5),
    approverRoles: z.array(z.enum(APPROVER_ROLES)).max(APPROVER_ROLES.length).default(['owner', 'admin']),
    allowSelfApproval: z.boolean().default(false),
    emergencyReduce: z.enum(['allow', 'approve']).default('allow').describe('"allow": a change that only reduces exposure applies without approval, audited as a bypass'),
  })
  .strict()
  .superRefine((p, ctx) => {
    if (p.requiredApprovals > 0 && p.approverRoles.length === 0) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['approverRoles'], message: 'name at least one role when approvals are required' });
    if (new Set(p.approverRoles).size !== p.approverRoles.length) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['approverRoles'], message: 'a role is named twice' });
  });
export type EnvironmentPolicy = z.infer<typeof EnvironmentPolicySchema>;

export const ChangePolicySchema = z
  .object({
    environments: z
      .object(Object.fromEntries(ENVIRONMENTS.map((e) => [e, EnvironmentPolicySchema.optional()])) as Record<(typeof ENVIRONMENTS)[number], z.ZodOptional<typeof EnvironmentPolicySchema>>)
      .strict()
      .describe('An environment without an entry, or with 0 approvals, needs none'),
  })
  .strict();
export type ChangePolicy = z.infer<typeof ChangePolicySchema>;

export const CHANGE_ACTIONS = ['create', 'update', 'toggle', 'delete'] as const;
export type ChangeAction = (typeof CHANGE_ACTIONS)[number];

/** The most changes one request holds (docs/limits.md). */
export const MAX_CHANGES_PER_REQUEST = 1_000;

const changeTarget = {
  serviceId: z.string().min(1).max(200),
  environment: EnvironmentSchema,
  flagKey: FlagKeySchema,
  baseVersion: z.number().int().positive().optional().describe("The flag's version the change was made against; defaults to its version when the request is made"),
};

/** The body each action takes is the body of its direct route; the change names the flag, so the body does not. */
const CreateBody = FlagCreateSchema.innerType().omit({ key: true, serviceId: true, environment: true, projectId: true }).strict();

/** One change: its flag, its action and the body the direct route for that action takes. */
export const FlagChangeInputSchema = z.discriminatedUnion('action', [
  z.object({ ...changeTarget, action: z.literal('create'), body: CreateBody.default({}) }).strict(),
  z.object({ ...changeTarget, action: z.literal('update'), body: FlagPatchSchema.innerType().omit({ version: true }) }).strict(),
  z.object({ ...changeTarget, action: z.literal('toggle'), body: FlagToggleSchema.omit({ version: true }).default({}) }).strict(),
  z.object({ ...changeTarget, action: z.literal('delete'), body: z.object({}).strict().default({}) }).strict(),
]);
export type FlagChangeInput = z.infer<typeof FlagChangeInputSchema>;

/** A change as stored and answered: its base version is always set (null for a create). */
export const StoredFlagChangeSchema = z.object({
  serviceId: z.string(),
  environment: EnvironmentSchema,
  flagKey: z.string(),
  action: z.enum(CHANGE_ACTIONS),
  body: z.record(z.unknown()),
  baseVersion: z.number().int().nullable(),
});
export type StoredFlagChange = z.infer<typeof StoredFlagChangeSchema>;

const scheduledAt = z
  .string()
  .datetime({ offset: true })
  .describe('ISO 8601; the request applies at this time once approved (a durable timer)');

const changes = z.array(FlagChangeInputSchema).min(1).max(MAX_CHANGES_PER_REQUEST);

export const ChangeRequestCreateSchema = z
  .object({
    title: z.string().trim().min(1).max(200),
    description: z.string().max(10_000).optional(),
    changes,
    scheduledAt: scheduledAt.optional(),
  })
  .strict();
export type ChangeRequestCreate = z.infer<typeof ChangeRequestCreateSchema>;

export const ChangeRequestPatchSchema = z
  .object({
    title: z.string().trim().min(1).max(200).optional(),
    description: z.string().max(10_000).nullable().optional(),
    changes: changes.optional(),
    scheduledAt: scheduledAt.nullable().optional().describe('null clears the schedule'),
  })
  .strict()
  .refine((p) => Object.values(p).some((v) => v !== undefined), { message: 'give at least one field to change' });
export type ChangeRequestPatch = z.infer<typeof ChangeRequestPatchSchema>;

export const CHANGE_REQUEST_STATUSES = ['pending', 'approved', 'scheduled', 'applied', 'rejected', 'cancelled', 'failed'] as const;
export type ChangeRequestStatus = (typeof CHANGE_REQUEST_STATUSES)[number];
/** A request in one of these never changes again. */
export const FINAL_STATUSES: ReadonlySet<ChangeRequestStatus> = new Set(['applied', 'rejected', 'cancelled', 'failed']);

export const ReviewSchema = z.object({ userId: z.string(), name: z.string(), at: z.string(), comment: z.string().optional() });
export type Review = z.infer<typeof ReviewSchema>;

export const ImpactSchema = z.object({
  serviceId: z.string(),
  flagKey: z.string(),
  environment: EnvironmentSchema,
  changed: z.number().int().describe('Recent real contexts that would get another value'),
  evaluated: z.number().int().describe('Recent real contexts evaluated before and after the change'),
});
export type Impact = z.infer<typeof ImpactSchema>;

export const ConflictSchema = z.object({
  serviceId: z.string(),
  environment: EnvironmentSchema,
  flagKey: z.string(),
  baseVersion: z.number().int().nullable(),
  currentVersion: z.number().int().nullable().describe('null: the flag does not exist (any more)'),
});
export type Conflict = z.infer<typeof ConflictSchema>;

export const ChangeRequestSchema = z.object({
  id: z.string(),
  projectId: z.string(),
  status: z.enum(CHANGE_REQUEST_STATUSES),
  title: z.string(),
  description: z.string().nullable(),
  changes: z.array(StoredFlagChangeSchema),
  approvals: z.array(ReviewSchema),
  rejection: ReviewSchema.nullable(),
  requiredApprovals: z.number().int().describe("The most any of its environments' policies requires, as the policy is now"),
  approverRoles: z.array(z.enum(APPROVER_ROLES)).describe('Roles that may approve in every environment it changes'),
  allowSelfApproval: z.boolean(),
  createdBy: z.string().nullable(),
  createdByName: z.string(),
  scheduledAt: z.string().nullable(),
  impact: z.array(ImpactSchema),
  conflicts: z.array(ConflictSchema).describe('Flags that moved since the request was made (computed on every read while it is open)'),
  failureReason: z.string().nullable(),
  appliedAt: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  actions: z
    .object({ edit: z.boolean(), approve: z.boolean(), reject: z.boolean(), cancel: z.boolean(), apply: z.boolean() })
    .describe('What the caller may do with it now'),
});
export type ChangeRequest = z.infer<typeof ChangeRequestSchema>;
