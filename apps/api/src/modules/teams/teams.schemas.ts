import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';
import { id, nullableString, timestamp } from '../../http/responses';

const description = () => Joi.string().trim().max(2000).allow('', null);

export const createTeamBody = Joi.object({ name: name().required(), description: description() });

export const updateTeamBody = Joi.object({ name: name(), description: description() }).min(1);

export const listTeamsQuery = Joi.object(paginationQuery);

export const listTeamMembersQuery = Joi.object(paginationQuery);

export const teamResponse = Joi.object({
  id: id('team'),
  name: Joi.string(),
  description: nullableString(),
  created_at: timestamp(),
  updated_at: timestamp(),
});

export const teamMemberResponse = Joi.object({
  user_id: id('usr'),
  email: Joi.string().email({ tlds: false }),
  name: Joi.string(),
  added_at: timestamp(),
});
