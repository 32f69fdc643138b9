// Contract between assessment launch and spend caps: launching an assessment in a scope (organization or
// project) whose cap has been reached is refused with 400 until the cap is raised.
// The spend module owns the implementation; assessment launch calls it inside its transaction.
import type { Tx } from '@svc/db';

export async function assertWithinSpendCap(_tx: Tx, _organizationId: string, _projectId: string): Promise<void> {
  // Implemented by the spend module (caps are not modelled yet).
}
