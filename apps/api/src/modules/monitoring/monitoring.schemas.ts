import Joi from 'joi';
import { id, timestamp } from '../../http/responses';

// result is checked by the service: a well-formed value outside its list is 422.
export const monitoringCheckBody = Joi.object({ result: Joi.string().min(1).max(50).required() });

export const monitoringCheckResponse = Joi.object({
  finding_id: id('fnd'),
  result: Joi.string().valid('still_fixed', 'regressed'),
  status: Joi.string(),
  previous_status: Joi.string(),
  checked_at: timestamp(),
});
