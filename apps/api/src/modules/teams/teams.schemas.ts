import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';

const description = () => Joi.string().trim().max(2000).allow('', null);

export const createTeamBody = Joi.object({ name: name().required(), description: description() });

export const updateTeamBody = Joi.object({ name: name(), description: description() }).min(1);

export const listTeamsQuery = Joi.object(paginationQuery);

export const listTeamMembersQuery = Joi.object(paginationQuery);
