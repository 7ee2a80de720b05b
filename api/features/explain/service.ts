import { notFound } from '../../http/errors';
import type { EvaluationContext } from '../evaluation/engine/index';
import { explainFlag, type Explanation } from '../evaluation/engine/explain';
import type { SnapshotStore } from '../evaluation/snapshots';
import type { Environment } from '../../domain/environments';

/**
 * Explain (docs/explain.md): the current flag as evaluation holds it (the same snapshot) run
 * through the same engine with a tracer. Nothing is recorded: an explanation is not an evaluation.
 */
export class ExplainService {
  constructor(private readonly deps: { snapshots: SnapshotStore }) {}

  async explain(serviceId: string, environment: Environment, flagKey: string, context: EvaluationContext): Promise<Explanation> {
    const service = await this.deps.snapshots.resolve(serviceId);
    const entry = service?.environments[environment].get(flagKey);
    if (entry === undefined) throw notFound('Flag');
    // No request default here: an error answers null, as REST evaluation does without one.
    return explainFlag({ definition: entry.record, compiled: entry.compiled }, flagKey, context, null);
  }
}
