import type { PrometheusGuard } from '../../domain/guards';
import type { ProjectRole } from '../../auth/principal';

/**
 * A project as the API returns it (docs/api-reference.md#projects-and-services: input fields plus
 * id, orgId, timestamps; role in lists).
 */
export interface ProjectRecord {
  id: string;
  orgId: string;
  name: string;
  slug: string;
  description: string;
  tags: string[];
  /**
   * Browser events for its services need X-Write-Token (docs/api-reference.md#browser-analytics).
   */
  requireWriteToken: boolean;
  /** A tripped guardrail check after a production change rolls it back (docs/guardrails.md); off: only notify. */
  guardrailAutoRollback: boolean;
  /** How long a production change is watched before the guardrail judges it (the windows compared). */
  guardrailWindowMinutes: number;
  /** Flag writes whose targeting flagd's in-process providers cannot evaluate exactly are refused (docs/flagd.md#compatibility). */
  requireInProcessCompatible: boolean;
  /** Prometheus guards asked at every guardrail check (docs/guardrails.md#prometheus-guards). */
  guardrailGuards: PrometheusGuard[];
  createdAt: string;
  updatedAt: string;
}

export interface ProjectWithRole extends ProjectRecord {
  /** The caller's role; null for a project API token. */
  role: ProjectRole | null;
}

export interface ProjectInput {
  name: string;
  description?: string;
  slug?: string;
  tags?: string[];
  orgId?: string;
}

export type ProjectPatch = Partial<Pick<ProjectRecord, 'name' | 'description' | 'slug' | 'tags' | 'requireWriteToken' | 'guardrailAutoRollback' | 'guardrailWindowMinutes' | 'requireInProcessCompatible' | 'guardrailGuards'>>;
