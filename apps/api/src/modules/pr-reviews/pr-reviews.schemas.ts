import Joi from 'joi';
import { paginationQuery } from '../../http/validate';
import { id, nullableString, timestamp } from '../../http/responses';

// verdict is checked by the service: a well-formed value outside its list is 422.
export const recordPrReviewBody = Joi.object({
  repository: Joi.string().trim().min(1).max(300).required(),
  pr_number: Joi.number().integer().min(1).max(2147483647).required(),
  verdict: Joi.string().min(1).max(50).required(),
  findings_count: Joi.number().integer().min(0).max(2147483647).required(),
  url: Joi.string().trim().uri({ scheme: ['https', 'http'] }).max(2000).allow(null),
});

export const listPrReviewsQuery = Joi.object({
  ...paginationQuery,
  repository: Joi.string().trim().min(1).max(300),
  verdict: Joi.string().valid('approved', 'changes_requested', 'commented'),
});

export const prReviewResponse = Joi.object({
  id: id('prr'),
  project_id: id('prj'),
  repository: Joi.string(),
  pr_number: Joi.number().integer().min(1),
  verdict: Joi.string().valid('approved', 'changes_requested', 'commented'),
  findings_count: Joi.number().integer().min(0),
  url: nullableString(),
  created_at: timestamp(),
});
