// The assessment lifecycle in one table. `archived` is a flag on finished assessments, not a state.
//
//   draft --launch--> queued --start (engine)--> running --complete (engine)--> completed
//                       |                          |------fail (engine)-------> failed
//                       |--cancel / emergency-stop-|--cancel------------------> cancelled
//                                                  |--emergency-stop----------> emergency_stopped
export const ASSESSMENT_STATES = ['draft', 'queued', 'running', 'completed', 'failed', 'cancelled', 'emergency_stopped'] as const;
export type AssessmentState = (typeof ASSESSMENT_STATES)[number];

/** Finished assessments: the only ones that can be archived. */
export const FINISHED_STATES: readonly AssessmentState[] = ['completed', 'failed', 'cancelled', 'emergency_stopped'];

/** An engine is (or may soon be) working on these: they cannot be deleted until cancelled or stopped. */
export const ACTIVE_STATES: readonly AssessmentState[] = ['queued', 'running'];

export type AssessmentAction = 'launch' | 'start' | 'complete' | 'fail' | 'cancel' | 'emergency_stop';

export interface AssessmentTransition {
  from: readonly AssessmentState[];
  to: AssessmentState;
  /** The timestamp column the transition sets. */
  stamp: 'queuedAt' | 'startedAt' | 'finishedAt';
}

export const ASSESSMENT_TRANSITIONS: Readonly<Record<AssessmentAction, AssessmentTransition>> = {
  launch: { from: ['draft'], to: 'queued', stamp: 'queuedAt' },
  start: { from: ['queued'], to: 'running', stamp: 'startedAt' },
  complete: { from: ['running'], to: 'completed', stamp: 'finishedAt' },
  fail: { from: ['running'], to: 'failed', stamp: 'finishedAt' },
  cancel: { from: ['queued', 'running'], to: 'cancelled', stamp: 'finishedAt' },
  emergency_stop: { from: ['queued', 'running'], to: 'emergency_stopped', stamp: 'finishedAt' },
};

/** The 409 detail for an impossible transition: names the current state and the states the action needs. */
export function impossibleTransition(action: string, current: string, from: readonly string[]): string {
  return `Cannot ${action.replace('_', '-')} an assessment that is ${current} (allowed from: ${from.join(', ')}).`;
}
