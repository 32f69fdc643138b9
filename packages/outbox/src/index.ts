export * from './publish';
export * from './enqueue';
export * from './relay';
export * from './held-back';
export { fairSharePriorities, heldBackMarker, markHeldBack, HELD_BACK_MARK_MS } from './fair-share';
export * from './security-notices';
