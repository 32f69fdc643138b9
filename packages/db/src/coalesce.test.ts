import { Coalescer } from './coalesce';

/** A batch function whose batches the test finishes by hand, recording what each carried. */
function manualBatches() {
  const batches: Array<{ items: number[]; finish: () => void; fail: (err: Error) => void }> = [];
  const run = (items: number[]) =>
    new Promise<number[]>((resolve, reject) => {
      batches.push({ items, finish: () => resolve(items.map((i) => i * 10)), fail: reject });
    });
  return { batches, run };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

it('runs a lone request at once, alone', async () => {
  const { batches, run } = manualBatches();
  const c = new Coalescer(run);
  const answer = c.run(1);
  await tick();
  expect(batches.map((b) => b.items)).toEqual([[1]]);
  batches[0].finish();
  await expect(answer).resolves.toBe(10);
});

it('sends the requests of one tick together, and those made while a batch runs in the next one', async () => {
  const { batches, run } = manualBatches();
  const c = new Coalescer(run);
  const first = [c.run(1), c.run(2)];
  await tick();
  const second = [c.run(3), c.run(4), c.run(5)];
  await tick();
  expect(batches.map((b) => b.items)).toEqual([[1, 2]]); // 3-5 wait for the running batch
  batches[0].finish();
  await expect(Promise.all(first)).resolves.toEqual([10, 20]);
  await tick();
  expect(batches.map((b) => b.items)).toEqual([[1, 2], [3, 4, 5]]);
  batches[1].finish();
  await expect(Promise.all(second)).resolves.toEqual([30, 40, 50]);
});

it('keeps up to maxInFlight batches running and caps a batch at maxBatch items', async () => {
  const { batches, run } = manualBatches();
  const c = new Coalescer(run, 2, 2);
  const answers = [c.run(1)];
  await tick();
  answers.push(c.run(2));
  await tick();
  answers.push(c.run(3), c.run(4), c.run(5));
  await tick();
  expect(batches.map((b) => b.items)).toEqual([[1], [2]]);
  batches[0].finish();
  batches[1].finish();
  await tick();
  expect(batches.map((b) => b.items)).toEqual([[1], [2], [3, 4], [5]]);
  batches[2].finish();
  batches[3].finish();
  await expect(Promise.all(answers)).resolves.toEqual([10, 20, 30, 40, 50]);
});

it("fails every request of a failed batch with its error, and goes on with the next", async () => {
  const { batches, run } = manualBatches();
  const c = new Coalescer(run);
  const failed = [c.run(1), c.run(2)];
  await tick();
  const later = c.run(3);
  batches[0].fail(new Error('boom'));
  await expect(Promise.all(failed.map((p) => p.catch((e: Error) => e.message)))).resolves.toEqual(['boom', 'boom']);
  await tick();
  batches[1].finish();
  await expect(later).resolves.toBe(30);
});

it('turns a batch function that throws synchronously into failed requests', async () => {
  const c = new Coalescer<number, number>(() => {
    throw new Error('sync');
  });
  await expect(c.run(1)).rejects.toThrow('sync');
  await expect(c.run(2)).rejects.toThrow('sync'); // not stuck with a batch counted in flight
});
