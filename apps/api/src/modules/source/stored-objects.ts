// Where the objects of an organization, project, assessment and upload live in the storage, and their removal.
// Every deletion path (an assessment, a project, an organization) calls deleteStoredObjectsOf after its rows are
// gone; the 30-day retention purge of deliveries never touches them.
import type { Logger } from '@svc/config';
import type { ObjectStorage } from '@svc/storage';

export interface StoredObjectsOwner {
  organizationId: string;
  projectId?: string;
  /** Requires projectId. */
  assessmentId?: string;
}

export function storagePrefixOf(owner: StoredObjectsOwner): string {
  let prefix = `orgs/${owner.organizationId}/`;
  if (owner.projectId) prefix += `projects/${owner.projectId}/`;
  if (owner.projectId && owner.assessmentId) prefix += `assessments/${owner.assessmentId}/`;
  return prefix;
}

export function uploadPrefixOf(owner: Required<StoredObjectsOwner>, archiveId: string): string {
  return `${storagePrefixOf(owner)}${archiveId}/`;
}

export const archiveKeyOf = (uploadPrefix: string) => `${uploadPrefix}archive.zip`;
export const fileKeyOf = (uploadPrefix: string, sha256: string) => `${uploadPrefix}files/${sha256}`;

/** Deletes every stored object of an organization, a project or an assessment. */
export async function deleteStoredObjectsOf(storage: ObjectStorage, owner: StoredObjectsOwner): Promise<void> {
  await storage.deletePrefix(storagePrefixOf(owner));
}

/**
 * For request paths whose rows are already deleted: a storage failure must not turn the answered deletion into a
 * 500. It is logged with the prefix left behind, for the operator (or a later run of deleteStoredObjectsOf).
 */
export async function deleteStoredObjectsAfterDeletion(
  deps: { storage: ObjectStorage; logger: Logger },
  owner: StoredObjectsOwner,
): Promise<void> {
  try {
    await deleteStoredObjectsOf(deps.storage, owner);
  } catch (err) {
    deps.logger.error('stored source objects could not be deleted', { prefix: storagePrefixOf(owner), error: (err as Error).message });
  }
}
