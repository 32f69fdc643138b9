import Joi from 'joi';
import { ERASURE_STATUSES } from '@svc/domain';
import { paginationQuery } from '../../http/validate';
import { id, nullableString, nullableTimestamp, timestamp } from '../../http/responses';

export const fileErasureBody = Joi.object({
  user_id: id('usr').required().description('The person to erase: a member or a former member of the organization'),
});

export const listErasureQuery = Joi.object({
  ...paginationQuery,
  status: Joi.string().valid(...ERASURE_STATUSES),
});

const receipt = Joi.object({
  membership_removed: Joi.boolean().description('The person was a member and was removed'),
  account_erased: Joi.boolean().description('The account itself was erased (the person belonged to no other organization)'),
  sessions_revoked: Joi.number().integer(),
  api_keys_revoked: Joi.number().integer(),
  replaced: Joi.array()
    .items(Joi.object({ table: Joi.string(), column: Joi.string(), rows: Joi.number().integer() }))
    .description('Every column where the name or e-mail was replaced by the pseudonym, with the rows changed'),
}).allow(null);

export const erasureResponse = Joi.object({
  id: id('era'),
  user_id: id('usr'),
  status: Joi.string().valid(...ERASURE_STATUSES),
  pseudonym: Joi.object({ name: Joi.string(), email: Joi.string() }).description('What replaces the name and e-mail'),
  requested_by_user_id: id('usr').allow(null),
  attempts: Joi.number().integer(),
  error: nullableString(),
  receipt,
  created_at: timestamp(),
  completed_at: nullableTimestamp(),
  cancelled_at: nullableTimestamp(),
});
