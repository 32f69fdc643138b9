export * from './publish';
export * from './enqueue';
export * from './relay';
export * from './sla-scan';
