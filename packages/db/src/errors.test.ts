import { isDatabaseUnavailable, isForeignKeyViolation, isLockNotAvailable, isTransactionConflict, isUniqueViolation, retryingCollisions } from './errors';

const adapterError = (cause: Record<string, unknown>, code = 'P2010') => ({
  code,
  meta: { driverAdapterError: { name: 'DriverAdapterError', cause } },
  message: 'Raw query failed.',
});

describe('isDatabaseUnavailable', () => {
  it.each([
    ['an unreachable server (model query)', { code: 'P1001', message: "Can't reach database server at 127.0.0.1:5432" }],
    ['an unreachable server (raw query)', adapterError({ kind: 'DatabaseNotReachable', host: '127.0.0.1', port: 5432 })],
    ['a closed connection', adapterError({ kind: 'ConnectionClosed' }, 'P1017')],
    ['a socket timeout', adapterError({ kind: 'SocketTimeout' })],
    ['no connection left', adapterError({ kind: 'TooManyConnections', cause: 'sorry' })],
    ['an administrator shutdown (57P01)', adapterError({ kind: 'postgres', originalCode: '57P01' })],
    ['a server starting up (57P03)', adapterError({ kind: 'postgres', originalCode: '57P03' })],
    ['the pool waiting too long', new Error('timeout exceeded when trying to connect')],
    ['a connection cut mid-query', new Error('Connection terminated unexpectedly')],
    [
      'a transaction that outran its timeout',
      { code: 'P2028', message: 'Transaction API error: A commit cannot be executed on an expired transaction. The timeout for this transaction was 5000 ms, however 5012 ms passed since the start of the transaction.' },
    ],
    ['a transaction that could not start in time', { code: 'P2028', message: 'Transaction API error: Unable to start a transaction in the given time.' }],
  ])('is true for %s', (_what, err) => {
    expect(isDatabaseUnavailable(err)).toBe(true);
  });

  it.each([
    ['a unique violation', { code: 'P2002', message: 'Unique constraint failed' }],
    ['a syntax error', adapterError({ kind: 'postgres', originalCode: '42601' })],
    ['a missing record', { code: 'P2025', message: 'Record to update not found.' }],
    ['a transaction used after it ended (misuse)', { code: 'P2028', message: 'Transaction API error: Transaction already closed: A query cannot be executed on a committed transaction.' }],
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['not an error', 'ECONNREFUSED'],
    ['null', null],
  ])('is false for %s', (_what, err) => {
    expect(isDatabaseUnavailable(err)).toBe(false);
  });

  it('does not confuse a unique violation with an outage, nor the reverse', () => {
    expect(isUniqueViolation({ code: 'P1001' })).toBe(false);
  });
});

describe('isForeignKeyViolation', () => {
  it("recognises Prisma's P2003 and PostgreSQL's 23503, however they arrive", () => {
    expect(isForeignKeyViolation({ code: 'P2003', message: 'Foreign key constraint violated' })).toBe(true);
    expect(isForeignKeyViolation({ code: '23503' })).toBe(true);
    expect(isForeignKeyViolation({ meta: { code: '23503' } })).toBe(true);
    expect(isForeignKeyViolation({ code: 'P2010', meta: { driverAdapterError: { cause: { originalCode: '23503' } } } })).toBe(true);
  });

  it('is false for anything else: a unique violation, an outage, a plain error, nothing', () => {
    expect(isForeignKeyViolation({ code: 'P2002' })).toBe(false);
    expect(isForeignKeyViolation({ code: '23505' })).toBe(false);
    expect(isForeignKeyViolation({ code: 'P1001' })).toBe(false);
    expect(isForeignKeyViolation(new Error('foreign key'))).toBe(false);
    expect(isForeignKeyViolation(null)).toBe(false);
    expect(isForeignKeyViolation('23503')).toBe(false);
  });
});

describe('isTransactionConflict', () => {
  it("recognises a deadlock (40P01), a serialization failure (40001) and Prisma's P2034, however they arrive", () => {
    expect(isTransactionConflict({ code: 'P2034', message: 'Transaction failed due to a write conflict or a deadlock. Please retry your transaction' })).toBe(true);
    expect(isTransactionConflict(adapterError({ kind: 'postgres', originalCode: '40P01' }))).toBe(true);
    expect(isTransactionConflict(adapterError({ kind: 'postgres', originalCode: '40001' }))).toBe(true);
    expect(isTransactionConflict({ code: '40P01' })).toBe(true);
    expect(isTransactionConflict({ meta: { code: '40001' } })).toBe(true);
  });

  it('is false for anything else: a lock timeout, a unique or foreign-key violation, an outage, a plain error, nothing', () => {
    expect(isTransactionConflict(adapterError({ kind: 'postgres', originalCode: '55P03' }))).toBe(false);
    expect(isTransactionConflict({ code: 'P2002' })).toBe(false);
    expect(isTransactionConflict({ code: '23503' })).toBe(false);
    expect(isTransactionConflict({ code: 'P1001' })).toBe(false);
    expect(isTransactionConflict(new Error('deadlock detected'))).toBe(false);
    expect(isTransactionConflict(null)).toBe(false);
    expect(isTransactionConflict('40P01')).toBe(false);
  });
});

describe('retryingCollisions', () => {
  const deadlock = { code: 'P2034', message: 'Transaction failed due to a write conflict or a deadlock. Please retry your transaction' };

  it('runs the transaction again after a deadlock, and answers what the run that went through answered', async () => {
    let runs = 0;
    const answer = await retryingCollisions(async () => {
      runs += 1;
      if (runs < 3) throw deadlock;
      return 'deleted';
    });
    expect(answer).toBe('deleted');
    expect(runs).toBe(3);
  });

  it('gives up after the last run, with its error', async () => {
    let runs = 0;
    await expect(retryingCollisions(async () => {
      runs += 1;
      throw deadlock;
    }, 2)).rejects.toBe(deadlock);
    expect(runs).toBe(2);
  });

  it('does not run again after any other error', async () => {
    let runs = 0;
    const refused = new Error('403');
    await expect(retryingCollisions(async () => {
      runs += 1;
      throw refused;
    })).rejects.toBe(refused);
    expect(runs).toBe(1);
  });
});

describe('isLockNotAvailable', () => {
  it('recognises 55P03 however it arrives, and a lock-timeout message', () => {
    expect(isLockNotAvailable(adapterError({ kind: 'postgres', originalCode: '55P03' }))).toBe(true);
    expect(isLockNotAvailable({ code: '55P03' })).toBe(true);
    expect(isLockNotAvailable({ meta: { code: '55P03' } })).toBe(true);
    expect(isLockNotAvailable(new Error('canceling statement due to lock timeout'))).toBe(true);
  });

  it('is false for a deadlock, a unique violation, a plain error, nothing', () => {
    expect(isLockNotAvailable(adapterError({ kind: 'postgres', originalCode: '40P01' }))).toBe(false);
    expect(isLockNotAvailable({ code: 'P2002' })).toBe(false);
    expect(isLockNotAvailable(new Error('boom'))).toBe(false);
    expect(isLockNotAvailable(null)).toBe(false);
  });
});
