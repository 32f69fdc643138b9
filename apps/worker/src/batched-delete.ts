// Deletes that may touch many rows go in batches, so that no statement holds many locks or runs for long.

/** Runs `deleteBatch(batchSize)` until a batch deletes fewer than `batchSize` rows; answers how many went in all. */
export async function deleteInBatches(batchSize: number, deleteBatch: (limit: number) => Promise<number>): Promise<number> {
  let deleted = 0;
  for (;;) {
    const batch = await deleteBatch(batchSize);
    deleted += batch;
    if (batch < batchSize) return deleted;
  }
}
