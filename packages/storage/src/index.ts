import { LocalStorage } from './local-storage';
import { S3Storage, type S3StorageOptions, type StorageLogger } from './s3-storage';
import type { ObjectStorage } from './storage';

export * from './storage';
export { LocalStorage } from './local-storage';
export { S3Storage, type S3StorageOptions, type StorageLogger } from './s3-storage';

export type StorageSettings = { driver: 'local'; dir: string } | ({ driver: 's3' } & S3StorageOptions);

/** The storage the configuration names (packages/config `storage`). */
export function createStorage(settings: StorageSettings, logger?: StorageLogger): ObjectStorage {
  return settings.driver === 'local' ? new LocalStorage(settings.dir) : new S3Storage(settings, logger);
}
