export * from './publish';
export * from './enqueue';
export * from './relay';
export * from './held-back';
