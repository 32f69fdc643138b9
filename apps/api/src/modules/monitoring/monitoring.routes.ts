import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import { monitoringCheckBody, monitoringCheckResponse } from './monitoring.schemas';
import { recordMonitoringCheck } from './monitoring.service';

export function monitoringRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/findings/:id/monitoring-checks',
      scope: 'assessments:update',
      summary:
        'Engine: a monitoring check of a fixed finding, {result: still_fixed | regressed}; regressed publishes monitoring.regression and finding.status_changed (write access required)',
      schemas: { body: monitoringCheckBody },
      response: monitoringCheckResponse,
      handler: (req) => recordMonitoringCheck(deps, principalOf(req), req.params.id as string, req.body),
    },
  ];
}
