import { z } from 'zod';
import { EnvironmentSchema } from '../../domain/environments';

// Stand-in for the change-request feature's own schemas while it is being built: replaced by
// them (and this file deleted) when it lands.

export const APPROVAL_REQUIRED = 'APPROVAL_REQUIRED';

export const ChangeRequestStatusSchema = z.enum(['pending', 'approved', 'scheduled', 'applied', 'rejected', 'cancelled', 'failed']);

export const ChangeRequestCreateSchema = z.object({
  title: z.string().min(1).max(200),
  description: z.string().max(10_000).optional(),
  changes: z
    .array(
      z.object({
        serviceId: z.string().min(1).max(128),
        environment: EnvironmentSchema,
        flagKey: z.string().min(1).max(256),
        action: z.enum(['create', 'update', 'toggle', 'delete']),
        body: z.record(z.unknown()).optional(),
        baseVersion: z.number().int().positive().optional(),
      }),
    )
    .min(1)
    .max(1000),
  scheduledAt: z.string().datetime({ offset: true }).optional(),
});
