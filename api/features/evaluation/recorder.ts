import { TableWriter, tsv, tsvTime, type TableFormat, type TableWriterOptions, type TableWriterStats } from '../../../analytics/writer';
import { boundedMemo, sha256Hex } from '../../infra/ids';
import type { RolloutSide } from './engine/index';

export type EvaluationSource = 'rest' | 'ofrep' | 'connect' | 'grpc-web';

/** One evaluation as the request path hands it over: cheap to build, nothing serialized yet. */
export interface EvaluationEvent {
  timestamp: number;
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
  reason: string;
  variant: string | undefined;
  value: unknown;
  latencyMs: number;
  errorCode: string | undefined;
  /** The rule that decided (analytics/schema/031): served it, or the caller fell outside its rollout. */
  ruleId: string | undefined;
  rolloutSide: RolloutSide | undefined;
  targetingKey: string | undefined;
  source: EvaluationSource;
}

export type RecorderOptions = TableWriterOptions;
export type RecorderStats = TableWriterStats;

const HASHES_KEPT = 50_000;

/** Which buffered events DELETE /api/evaluations removes before they are written. */
export interface DiscardFilter {
  projectIds: ReadonlySet<string>;
  serviceId?: string;
  flagKey: string;
}

/** The evaluation_events line; a targeting key seen again is not hashed again (keys repeat across flags). */
function evaluationEventsFormat(): TableFormat<EvaluationEvent> {
  const hash = boundedMemo(hashTargetingKey, HASHES_KEPT);
  return {
    table: 'evaluation_events',
    columns: [
      'timestamp', 'project_id', 'service_id', 'environment', 'flag_key', 'reason', 'variant', 'value',
      'latency_ms', 'error_code', 'rule_id', 'rollout_side', 'targeting_key_hash', 'source',
    ],
    line: (e) =>
      `${tsvTime(e.timestamp)}\t${tsv(e.projectId)}\t${tsv(e.serviceId)}\t${tsv(e.environment)}` +
      `\t${tsv(e.flagKey)}\t${tsv(e.reason)}\t${e.variant === undefined ? '' : tsv(e.variant)}` +
      `\t${e.value === undefined ? 'null' : tsv(JSON.stringify(e.value))}\t${e.latencyMs}\t${e.errorCode === undefined ? '' : tsv(e.errorCode)}` +
      `\t${e.ruleId === undefined ? '' : tsv(e.ruleId)}\t${e.rolloutSide ?? ''}` +
      `\t${e.targetingKey ? hash(e.targetingKey) : ''}\t${e.source}\n`,
  };
}

/**
 * The evaluation event writer (DESIGN data flow 3): the shared batched writer
 * (analytics/writer.ts) on `evaluation_events`, the hot table (200,000 events/s, bench:writer),
 * plus what DELETE /api/evaluations needs: forgetting a flag's events not written yet.
 */
export class EvaluationRecorder extends TableWriter<EvaluationEvent> {
  constructor(opts: RecorderOptions) {
    super(evaluationEventsFormat(), opts);
  }

  /** Forgets buffered events of a flag that are not written yet (DELETE /api/evaluations). */
  discard(filter: DiscardFilter): void {
    const projects = new Set([...filter.projectIds].map(tsv));
    const service = filter.serviceId === undefined ? undefined : tsv(filter.serviceId);
    const flag = tsv(filter.flagKey);
    this.discardLines((line) => {
      const [, project, serviceId, , flagKey] = line.split('\t', 5);
      return flagKey === flag && projects.has(project) && (service === undefined || serviceId === service);
    });
  }
}

/** First 16 bytes of SHA-256 in hex: the documented, reproducible form stored in ClickHouse. */
export function hashTargetingKey(targetingKey: string): string {
  return sha256Hex(targetingKey).slice(0, 32);
}
