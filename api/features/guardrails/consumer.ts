import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { startWorkflow, type Temporal } from '../../infra/temporal';
import type { Sql } from '../../infra/postgres';
import { GUARDRAIL_WATCH, guardrailWatchId } from '../../../workflows/messages';
import type { FlagChangeEvent, FlagContentField } from '../flags/types';
import type { OutboxConsumer } from '../../lib/outbox/relay';

/**
 * The changes a guardrail watches: whatever changes the value production traffic gets (on/off,
 * the default, variants and their weights, rules with their conditions, values and rollout
 * percentages). Name, description, tags and isPublic serve nothing different.
 */
export const WATCHED_FIELDS: readonly FlagContentField[] = ['enabled', 'defaultValue', 'variants', 'targeting'];

/**
 * Changes a canary pipeline makes (its actor, activities/canary.ts pipelineActor): the pipeline
 * gates each stage itself on treatment against control, which a before/after rollback would fight.
 */
const CANARY_ACTOR_PREFIX = 'canary:';

/**
 * Outbox consumer: starts a guardrail watch (workflows/guardrail.ts) for every committed toggle
 * or serving change of a production flag. Idempotent on the change: the workflow id is the flag
 * and version, and an id that ever ran is never started again.
 */
export class GuardrailConsumer implements OutboxConsumer {
  readonly name = 'guardrail';

  constructor(private readonly deps: { sql: Sql; temporal: Temporal }) {}

  async handle(event: FlagChangeEvent): Promise<void> {
    const flag = event.flag;
    if (!flag || flag.environment !== 'production') return;
    if (event.event !== 'flag.toggled' && event.event !== 'flag.updated') return;
    if (!WATCHED_FIELDS.some((field) => field in event.data.changes)) return;
    if (event.actor.startsWith(CANARY_ACTOR_PREFIX)) return;
    const [row] = await this.deps.sql<{ guardrail_window_minutes: number; change_type: string | null }[]>`
      SELECT p.guardrail_window_minutes, v.change_type
      FROM projects p LEFT JOIN flag_versions v ON v.flag_id = ${flag.id} AND v.version = ${flag.version}
      WHERE p.id = ${flag.projectId}`;
    // A deleted project; or a rollback, which auto-rollback never undoes: nothing to watch.
    if (!row || row.change_type === 'rollback') return;
    try {
      await startWorkflow(
        this.deps.temporal,
        GUARDRAIL_WATCH,
        { flagId: flag.id, version: flag.version, windowMinutes: row.guardrail_window_minutes, changedAt: new Date(event.timestamp).toISOString() },
        { workflowId: guardrailWatchId(flag.id, flag.version), workflowIdReusePolicy: 'REJECT_DUPLICATE' },
      );
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    }
  }
}
