// The pg driver adapter is given discrete connection fields: a connection string loses an empty password.
export interface PgFields {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

export function pgFields(databaseUrl: string): PgFields {
  const url = new URL(databaseUrl);
  return {
    host: decodeURIComponent(url.hostname),
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username || 'postgres'),
    password: decodeURIComponent(url.password),
    database: decodeURIComponent(url.pathname.replace(/^\//, '')),
  };
}
