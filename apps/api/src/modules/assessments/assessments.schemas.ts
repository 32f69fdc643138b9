import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';

export const createAssessmentBody = Joi.object({ name: name().required() });

export const listAssessmentsQuery = Joi.object({
  ...paginationQuery,
  project_id: Joi.string().min(1).max(200),
});
