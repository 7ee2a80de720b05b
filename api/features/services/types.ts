/** A service as the API returns it (CONTRACT 3 and 7: input fields, slug, id, timestamps). */
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
