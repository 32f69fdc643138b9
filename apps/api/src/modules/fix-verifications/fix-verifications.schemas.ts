import Joi from 'joi';
import { paginationQuery } from '../../http/validate';
import { id, nullableTimestamp, timestamp } from '../../http/responses';

// result is checked by the service: a well-formed value outside its list is 422.
export const completeFixVerificationBody = Joi.object({ result: Joi.string().min(1).max(50).required() });

export const listFixVerificationsQuery = Joi.object(paginationQuery);

export const fixVerificationResponse = Joi.object({
  id: id('fxv'),
  finding_id: id('fnd'),
  assessment_id: id('asm'),
  project_id: id('prj'),
  status: Joi.string().valid('running', 'completed'),
  result: Joi.string().valid('fixed', 'still_present').allow(null),
  finding_status: Joi.string(),
  created_at: timestamp(),
  completed_at: nullableTimestamp(),
});
