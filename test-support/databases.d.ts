export function createMigratedDatabase(name: string, serverAdminUrl?: string): Promise<string>;
export function dropDatabase(name: string): Promise<void>;
export function createIsolatedDatabase(): Promise<{ url: string; drop(): Promise<void> }>;
