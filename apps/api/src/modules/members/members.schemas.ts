import Joi from 'joi';
import { ROLES } from '@svc/scopes';
import { paginationQuery } from '../../http/validate';
import { id, timestamp } from '../../http/responses';
import { sensitiveChangePassword } from '../auth/auth.schemas';

export const listMembersQuery = Joi.object(paginationQuery);

export const changeRoleBody = Joi.object({
  role: Joi.string().valid(...ROLES).required(),
  // Asked only when the role is raised (sudo mode): lowering one never needs it.
  current_password: sensitiveChangePassword(),
});

export const memberResponse = Joi.object({
  user_id: id('usr'),
  email: Joi.string().email({ tlds: false }),
  name: Joi.string(),
  status: Joi.string().valid('pending', 'active'),
  role: Joi.string().valid(...ROLES),
  joined_at: timestamp(),
});
