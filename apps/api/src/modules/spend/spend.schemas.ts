import Joi from 'joi';
import { isoTimestamp, paginationQuery } from '../../http/validate';
import { id, nullableId, nullableString, nullableTimestamp, timestamp } from '../../http/responses';

const AMOUNT = /^\d{1,12}(\.\d{1,2})?$/;

/** An amount of credits: a string ("12.50") or a JSON number, at most 12 digits and 2 decimals; kept as a string. */
export const credits = () =>
  Joi.alternatives()
    .try(Joi.string().trim(), Joi.number())
    .custom((value: string | number, helpers) => {
      const text = typeof value === 'number' ? String(value) : value;
      if (!AMOUNT.test(text)) return helpers.message({ custom: 'credits must be a decimal amount with at most 2 decimals, e.g. "12.50"' });
      return text;
    });

export const recordUsageBody = Joi.object({
  project_id: Joi.string().min(1).max(200).allow(null),
  credits: credits().required(),
  description: Joi.string().trim().max(1000).allow('', null),
});

export const listUsageQuery = Joi.object({
  ...paginationQuery,
  project_id: Joi.string().min(1).max(200),
  since: isoTimestamp(),
  until: isoTimestamp(),
});

// kind is checked by the service: a well-formed value outside its list is 422.
export const createLimitBody = Joi.object({
  project_id: Joi.string().min(1).max(200).allow(null),
  kind: Joi.string().min(1).max(50).required(),
  credits: credits().required(),
});

export const updateLimitBody = Joi.object({ credits: credits().required() });

export const listLimitsQuery = Joi.object({
  ...paginationQuery,
  project_id: Joi.string().min(1).max(200),
  kind: Joi.string().valid('threshold', 'cap'),
});

const amount = () => Joi.string().pattern(/^\d+\.\d{2}$/, 'amount');

export const usageResponse = Joi.object({
  id: id('use'),
  project_id: nullableId('prj'),
  credits: amount(),
  description: nullableString(),
  created_at: timestamp(),
});

export const balanceResponse = Joi.object({
  spent_credits: amount(),
  unassigned_credits: amount(),
  cap_reached: Joi.boolean(),
  projects: Joi.array().items(Joi.object({ project_id: id('prj'), spent_credits: amount(), cap_reached: Joi.boolean() })),
});

export const limitResponse = Joi.object({
  id: id('lim'),
  scope: Joi.string().valid('organization', 'project'),
  project_id: nullableId('prj'),
  kind: Joi.string().valid('threshold', 'cap'),
  credits: amount(),
  triggered: Joi.boolean(),
  triggered_at: nullableTimestamp(),
  created_at: timestamp(),
  updated_at: timestamp(),
});
