import { TimeoutError, waitAtMost, withTimeout } from './timeout';

const after = <T>(ms: number, value: T, fail = false) =>
  new Promise<T>((resolve, reject) => setTimeout(() => (fail ? reject(new Error(String(value))) : resolve(value)), ms));

describe('withTimeout', () => {
  it('gives the work its own value when it settles in time', async () => {
    await expect(withTimeout(() => after(5, 'done'), 200)).resolves.toBe('done');
  });

  it("gives the work's own error when it fails in time", async () => {
    await expect(withTimeout(() => after(5, 'refused', true), 200)).rejects.toThrow('refused');
  });

  it('rejects with a TimeoutError naming the bound when the work is late', async () => {
    const late = withTimeout(() => after(200, 'late'), 20);
    await expect(late).rejects.toBeInstanceOf(TimeoutError);
    await expect(late).rejects.toThrow('Timed out after 20 ms');
  });

  it('swallows a late rejection of the work (no unhandled rejection)', async () => {
    const unhandled = jest.fn();
    process.on('unhandledRejection', unhandled);
    await expect(withTimeout(() => after(30, 'too late', true), 5)).rejects.toBeInstanceOf(TimeoutError);
    await after(60, null);
    process.off('unhandledRejection', unhandled);
    expect(unhandled).not.toHaveBeenCalled();
  });
});

describe('waitAtMost', () => {
  it('is true, without calling onTimeout, when the work settles in time', async () => {
    const onTimeout = jest.fn();
    await expect(waitAtMost(() => after(5, 'done'), 200, onTimeout)).resolves.toBe(true);
    expect(onTimeout).not.toHaveBeenCalled();
  });

  it('is false after calling onTimeout once when the work never settles', async () => {
    const onTimeout = jest.fn();
    await expect(waitAtMost(() => new Promise(() => undefined), 20, onTimeout)).resolves.toBe(false);
    expect(onTimeout).toHaveBeenCalledTimes(1);
  });

  it("rejects with the work's own error when it fails in time", async () => {
    const onTimeout = jest.fn();
    await expect(waitAtMost(() => after(5, 'refused', true), 200, onTimeout)).rejects.toThrow('refused');
    expect(onTimeout).not.toHaveBeenCalled();
  });
});
