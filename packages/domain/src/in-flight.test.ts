import { InFlight } from './in-flight';

const after = <T>(ms: number, value: T, fail = false) =>
  new Promise<T>((resolve, reject) => setTimeout(() => (fail ? reject(new Error(String(value))) : resolve(value)), ms));
const tick = () => after(0, null);

/** A promise settled by the test, not by a timer: the order of events does not depend on the machine's load. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('InFlight', () => {
  it('keeps each piece of work until it settles, and passes its value or error through', async () => {
    const work = new InFlight();
    const [answer, refusal] = [deferred<string>(), deferred<string>()];
    const ok = work.start(() => answer.promise);
    const failing = work.start(() => refusal.promise);
    expect(work.size).toBe(2);
    answer.resolve('done');
    await expect(ok).resolves.toBe('done');
    expect(work.size).toBe(1);
    refusal.reject(new Error('refused'));
    await expect(failing).rejects.toThrow('refused');
    expect(work.size).toBe(0);
  });

  it('starts the work at once, in the caller\'s turn', () => {
    const work = new InFlight();
    let started = false;
    void work.start(() => {
      started = true;
      return after(10, null);
    });
    expect(started).toBe(true);
  });

  it('keeps work that throws before returning a promise, or returns none, until it ends', async () => {
    const work = new InFlight();
    const throwing = work.start((): Promise<string> => {
      throw new Error('at once');
    });
    const plain = work.start(() => 42);
    expect(work.size).toBe(2);
    await expect(throwing).rejects.toThrow('at once');
    await expect(plain).resolves.toBe(42);
    expect(work.size).toBe(0);
  });

  it('keeps work started elsewhere (keep) and returns the same promise', async () => {
    const work = new InFlight();
    const request = after(10, 'answer');
    expect(work.keep(request)).toBe(request);
    expect(work.size).toBe(1);
    await request;
    await tick();
    expect(work.size).toBe(0);
  });

  it('counts a promise kept twice (shared by two callers) twice, until it settles', async () => {
    const work = new InFlight();
    const shared = after(10, 'answer');
    void work.start(() => shared, 'first');
    work.keep(shared, 'second');
    expect(work.size).toBe(2);
    expect(work.countByLabel()).toEqual({ first: 1, second: 1 });
    await shared;
    await tick();
    expect(work.size).toBe(0);
  });

  it('is settled at once with nothing under way', async () => {
    const work = new InFlight();
    let settled = false;
    void work.settled().then(() => (settled = true));
    await tick();
    expect(settled).toBe(true);
  });

  it('is settled only after every piece, those started meanwhile and those that failed included', async () => {
    const work = new InFlight();
    const [first, second] = [deferred(), deferred()];
    const order: string[] = [];
    void work.start(() => first.promise).catch(() => order.push('first failed'));
    const settled = work.settled().then(() => order.push('settled'));
    void work.start(() => second.promise).then(() => order.push('second done'));
    first.reject(new Error('x'));
    await tick();
    expect(order).toEqual(['first failed']);
    second.resolve();
    await settled;
    expect(order).toEqual(['first failed', 'second done', 'settled']);
  });

  it('never settles while a piece hangs (the caller bounds the wait)', async () => {
    const work = new InFlight();
    void work.start(() => new Promise<void>(() => undefined));
    let settled = false;
    void work.settled().then(() => (settled = true));
    await after(30, null);
    expect(settled).toBe(false);
    expect(work.size).toBe(1);
  });

  it('counts the work under way by label', async () => {
    const work = new InFlight();
    const hang = () => new Promise<void>(() => undefined);
    void work.start(hang, 'record a failed login');
    void work.start(hang, 'record a failed login');
    void work.start(hang, 'send a mail');
    void work.start(hang);
    void work.start(() => Promise.resolve(), 'ended');
    await tick();
    expect(work.countByLabel()).toEqual({ 'record a failed login': 2, 'send a mail': 1, '': 1 });
  });
});
