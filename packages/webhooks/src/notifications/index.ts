export * from './message';
export * from './channels';
