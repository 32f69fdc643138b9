import type { Clock } from '@svc/domain';

/** Real time shifted by an adjustable offset: time keeps flowing, and tests can jump ahead. */
export class OffsetClock implements Clock {
  private offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
  advance(ms: number): void {
    this.offsetMs += ms;
  }
  reset(): void {
    this.offsetMs = 0;
  }
}
