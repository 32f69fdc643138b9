import Joi from 'joi';
import { ROLES } from '@svc/scopes';
import { email, name, paginationQuery } from '../../http/validate';

export const createInvitationBody = Joi.object({
  email: email().required(),
  role: Joi.string().valid(...ROLES).required(),
});

export const listInvitationsQuery = Joi.object(paginationQuery);

// The password's strength rules apply to new accounts only (checked in the service); an existing user proves
// the password they already have. More than 72 bytes is refused either way: bcrypt would ignore the rest.
export const acceptInvitationBody = Joi.object({
  token: Joi.string().min(1).max(200).required(),
  name: name(),
  password: Joi.string().min(1).custom((value: string, helpers) => {
    if (Buffer.byteLength(value, 'utf8') > 72) return helpers.message({ custom: 'password must be at most 72 bytes' });
    return value;
  }),
});
