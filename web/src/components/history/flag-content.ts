import type { paths } from '../../api/client';

export type FlagVersion = paths['/api/flags/{key}/history']['get']['responses'][200]['content']['application/json']['versions'][number];
export type FlagSnapshot = FlagVersion['snapshot'];

/** A snapshot's content: identity and bookkeeping fields change on every write or never, and would only add noise to a diff. */
export function contentOf(snapshot: FlagSnapshot): Partial<FlagSnapshot> {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { id, projectId, serviceId, environment, key, version, createdAt, updatedAt, ...content } = snapshot;
  return content;
}
