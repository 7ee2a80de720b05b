/**
 * A service as the API returns it (docs/api-reference.md#projects-and-services: input fields, slug,
 * id, timestamps).
 */
export interface ServiceRecord {
  id: string;
  projectId: string;
  name: string;
  slug: string;
  description: string;
  tags: string[];
  createdAt: string;
  updatedAt: string;
}

export interface ServiceInput {
  projectId: string;
  name: string;
  slug?: string;
  description?: string;
  tags?: string[];
}

export type ServicePatch = Partial<Pick<ServiceRecord, 'name' | 'slug' | 'description' | 'tags'>>;
