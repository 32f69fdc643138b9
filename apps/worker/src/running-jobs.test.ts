import { RunningJobs } from './running-jobs';

const after = <T>(ms: number, value: T, fail = false) =>
  new Promise<T>((resolve, reject) => setTimeout(() => (fail ? reject(new Error(String(value))) : resolve(value)), ms));

describe('RunningJobs', () => {
  it('counts each run of a processor until it settles, and passes its value or error through', async () => {
    const jobs = new RunningJobs();
    const ok = jobs.counting((ms: number) => after(ms, 'done'));
    const failing = jobs.counting((ms: number) => after(ms, 'refused', true));
    const runs = [ok(20), failing(30)];
    expect(jobs.size).toBe(2);
    await expect(runs[0]).resolves.toBe('done');
    await expect(runs[1]).rejects.toThrow('refused');
    expect(jobs.size).toBe(0);
  });

  it('counts a processor that throws at once, or returns no promise, until it ends', async () => {
    const jobs = new RunningJobs();
    const throwing = jobs.counting((): Promise<string> => {
      throw new Error('at once');
    });
    const plain = jobs.counting(((x: number) => x * 2) as unknown as (x: number) => Promise<number>);
    await expect(throwing()).rejects.toThrow('at once');
    await expect(plain(21)).resolves.toBe(42);
    expect(jobs.size).toBe(0);
  });

  it('is idle at once with nothing running', async () => {
    const jobs = new RunningJobs();
    let idle = false;
    void jobs.idle().then(() => (idle = true));
    await after(0, null);
    expect(idle).toBe(true);
  });

  it('becomes idle only after every run, those started meanwhile and those that failed included', async () => {
    const jobs = new RunningJobs();
    const run = jobs.counting((ms: number, fail: boolean) => after(ms, 'x', fail));
    const order: string[] = [];
    void run(20, true).catch(() => order.push('first failed'));
    const idle = jobs.idle().then(() => order.push('idle'));
    await after(10, null);
    void run(40, false).then(() => order.push('second done'));
    await idle;
    expect(order).toEqual(['first failed', 'second done', 'idle']);
  });
});
