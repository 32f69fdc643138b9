export * from './actions';
export * from './record';
export * from './redact';
