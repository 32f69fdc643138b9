// @svc/domain: the rules the API and the worker must agree on. Pure functions and constants only: no I/O,
// no dependencies, so every rule can be unit-tested exhaustively and imported from anywhere.
export * from './clock';
export * from './timeout';
export * from './in-flight';
export * from './subscription-health';
export * from './findings';
export * from './finding-transitions';
export * from './finding-event-data';
export * from './sla';
export * from './retry-policy';
export * from './delivery-operations';
export * from './source-archive';
export * from './source-sweep';
export * from './isolation-policy';
export * from './erasure';
export * from './idempotency';
export * from './personal-data-inventory';
export * from './one-line';
export * from './security-notices';
