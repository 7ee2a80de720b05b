import type { ProjectRole } from '../../auth/principal';

/** A project as the API returns it (CONTRACT 3: input fields plus id, orgId, timestamps; role in lists). */
export interface ProjectRecord {
  id: string;
  orgId: string;
  name: string;
  slug: string;
  description: string;
  tags: string[];
  /** Browser events for its services need X-Write-Token (CONTRACT 11). */
  requireWriteToken: boolean;
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

export type ProjectPatch = Partial<Pick<ProjectRecord, 'name' | 'description' | 'slug' | 'tags' | 'requireWriteToken'>>;
