// Deletes that may touch many rows go in batches, so that no statement holds many locks or runs for long.

/**
 * Longest a sweep beside the retention purge runs in one maintenance job; what is left goes in the next one, a
 * minute later. They share the single-slot maintenance queue: a backlog of millions must not hold it for minutes.
 */
export const SWEEP_BUDGET_MS = 5_000;

/**
 * Runs `deleteBatch(batchSize)` until a batch deletes fewer than `batchSize` rows, or for at most `budgetMs`
 * (the batch under way finishes); answers how many went in all.
 */
export async function deleteInBatches(
  batchSize: number,
  deleteBatch: (limit: number) => Promise<number>,
  budgetMs = SWEEP_BUDGET_MS,
): Promise<number> {
  const deadline = performance.now() + budgetMs;
  let deleted = 0;
  for (;;) {
    const batch = await deleteBatch(batchSize);
    deleted += batch;
    if (batch < batchSize || performance.now() >= deadline) return deleted;
  }
}
