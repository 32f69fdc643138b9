// WorkAfterAnswer on its own (apps/api/src/http/after-answer.ts): what drain waits for, what it gives up on, and how a
// failure is logged. The process-level behaviour (SIGTERM, SHUTDOWN_DRAIN_TIMEOUT_MS) is shutdown-drain.test.ts.
import { createLogger } from '@svc/config';
import { WorkAfterAnswer } from '../src/http/after-answer';

const never = () => new Promise<void>(() => undefined);
const after = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A silent logger whose lines are kept, as [level, message, fields]. */
function recordingLogger() {
  const lines: Array<[string, string, Record<string, unknown>]> = [];
  const logger = createLogger({ service: 'test', silent: true });
  for (const level of ['warn', 'error'] as const) {
    (logger as unknown as Record<string, unknown>)[level] = (message: string, fields: Record<string, unknown>) => {
      lines.push([level, message, fields]);
      return logger;
    };
  }
  return { logger, lines };
}

describe('drain', () => {
  it('with nothing started: resolves at once with 0', async () => {
    const work = new WorkAfterAnswer(recordingLogger().logger);
    const started = Date.now();
    expect(await work.drain(5_000)).toBe(0);
    // Far from the 5 s it would wait for work, with room for a loaded machine.
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('with work that has ended (succeeded or failed): 0, nothing left running', async () => {
    const { logger } = recordingLogger();
    const work = new WorkAfterAnswer(logger);
    work.run('succeed', () => Promise.resolve('done'));
    work.run('fail', () => Promise.reject(new Error('nope')));
    await after(10);
    expect(work.stillRunning()).toEqual({});
    expect(await work.drain(5_000)).toBe(0);
  });

  it('waits for work still running, and for work that work starts meanwhile', async () => {
    const work = new WorkAfterAnswer(recordingLogger().logger);
    const ended: string[] = [];
    work.run('first', async () => {
      await after(100);
      ended.push('first');
      work.run('second', async () => {
        await after(100);
        ended.push('second');
      });
    });
    const started = Date.now();
    expect(await work.drain(5_000)).toBe(0);
    expect(ended).toEqual(['first', 'second']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
  });

  it('gives up at the deadline on work that does not end: the number still running, which go on being tracked', async () => {
    const work = new WorkAfterAnswer(recordingLogger().logger);
    work.run('hang', never);
    work.run('end soon', () => after(20));
    work.run('hang', never);
    const started = Date.now();
    expect(await work.drain(200)).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(work.stillRunning()).toEqual({ hang: 2 });
  });
});

describe('run', () => {
  it('starts the work at once, without waiting for it', () => {
    const work = new WorkAfterAnswer(recordingLogger().logger);
    let started = false;
    work.run('start', () => {
      started = true;
      return never();
    });
    expect(started).toBe(true);
    expect(work.stillRunning()).toEqual({ start: 1 });
  });

  it('logs a failure as "Could not <label>" with the fields given and the error, at the level given (error by default)', async () => {
    const { logger, lines } = recordingLogger();
    const work = new WorkAfterAnswer(logger);
    work.run('record a failed login', () => Promise.reject(new Error('database gone')), { fields: { user_id: 'usr_1' } });
    work.run('record API key use', () => Promise.reject(new Error('busy')), { level: 'warn' });
    work.run('throw before a promise', () => {
      throw new Error('synchronous');
    });
    expect(await work.drain(1_000)).toBe(0);
    expect(lines).toEqual([
      ['error', 'Could not record a failed login', { user_id: 'usr_1', error: 'Error: database gone' }],
      ['warn', 'Could not record API key use', { error: 'Error: busy' }],
      ['error', 'Could not throw before a promise', { error: 'Error: synchronous' }],
    ]);
  });
});
