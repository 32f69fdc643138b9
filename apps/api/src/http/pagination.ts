// Cursor pagination over time-sortable ids: newest first, `next_cursor` is the last id of the page.
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

export interface PageQuery {
  limit: number;
  cursor?: string;
}

/** Prisma arguments for one page; fetch one extra row to know whether another page exists. */
export function pageArgs(query: PageQuery) {
  return {
    where: query.cursor ? { id: { lt: query.cursor } } : {},
    orderBy: { id: 'desc' as const },
    take: query.limit + 1,
  };
}

export function toPage<R extends { id: string }, T>(rows: R[], query: PageQuery, present: (row: R) => T): Page<T> {
  const hasMore = rows.length > query.limit;
  const pageRows = hasMore ? rows.slice(0, query.limit) : rows;
  return { data: pageRows.map(present), next_cursor: hasMore ? pageRows[pageRows.length - 1].id : null };
}
