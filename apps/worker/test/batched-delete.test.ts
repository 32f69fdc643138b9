// deleteInBatches, the loop of the sweeps beside the retention purge: pure, no database (the statements it runs are
// tested with their sweeps).
import { deleteInBatches } from '../src/batched-delete';

/** A table of `rows` rows from which each batch deletes up to its limit, taking `msEach`. */
function table(rows: number, msEach = 0) {
  const batches: number[] = [];
  return {
    batches,
    deleteBatch: async (limit: number) => {
      if (msEach > 0) await new Promise((r) => setTimeout(r, msEach));
      const n = Math.min(limit, rows);
      rows -= n;
      batches.push(n);
      return n;
    },
    left: () => rows,
  };
}

it('deletes batch after batch until one comes back short', async () => {
  const t = table(2_500);
  expect(await deleteInBatches(1_000, t.deleteBatch)).toBe(2_500);
  expect(t.batches).toEqual([1_000, 1_000, 500]);
});

it('stops at its budget with the batch under way finished, leaving the rest to the next run', async () => {
  // A backlog of millions must not hold the single-slot maintenance queue for minutes.
  const t = table(1_000_000, 20);
  const deleted = await deleteInBatches(1_000, t.deleteBatch, 100);
  expect(deleted).toBeGreaterThanOrEqual(1_000);
  expect(deleted).toBeLessThan(20_000);
  expect(t.left()).toBe(1_000_000 - deleted);
  expect(await deleteInBatches(1_000, t.deleteBatch, 0)).toBe(1_000);
});
