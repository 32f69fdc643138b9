import Joi from 'joi';
import { ROLES } from '@svc/scopes';
import { paginationQuery } from '../../http/validate';

export const listMembersQuery = Joi.object(paginationQuery);

export const changeRoleBody = Joi.object({ role: Joi.string().valid(...ROLES).required() });
