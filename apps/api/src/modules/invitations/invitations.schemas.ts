import Joi from 'joi';
import { ROLES } from '@svc/scopes';
import { email, name, paginationQuery, password } from '../../http/validate';
import { id, nullableTimestamp, timestamp } from '../../http/responses';
import { sensitiveChangePassword } from '../auth/auth.schemas';

export const createInvitationBody = Joi.object({
  email: email().required(),
  role: Joi.string().valid(...ROLES).required(),
  current_password: sensitiveChangePassword(),
});

export const listInvitationsQuery = Joi.object(paginationQuery);

// The password's strength rules apply to new accounts only (checked in the service); an existing user proves
// the password they already have. More than 72 bytes is refused either way: bcrypt would ignore the rest.
export const acceptInvitationBody = Joi.object({
  token: Joi.string().min(1).max(200).required(),
  name: name(),
  password: password().min(1),
});

// Nobody is invited as owner (ownership moves by transfer), so an invitation carries one of the other roles.
const invitedRole = () => Joi.string().valid(...ROLES.filter((r) => r !== 'owner'));

export const invitationResponse = Joi.object({
  id: id('inv'),
  email: Joi.string().email({ tlds: false }),
  role: invitedRole(),
  status: Joi.string().valid('pending', 'accepted', 'expired'),
  invited_by_id: id('usr'),
  expires_at: timestamp(),
  accepted_at: nullableTimestamp(),
  created_at: timestamp(),
});

export const acceptedInvitationResponse = Joi.object({
  organization: Joi.object({ id: id('org'), name: Joi.string() }),
  user_id: id('usr'),
  email: Joi.string().email({ tlds: false }),
  role: invitedRole(),
  new_user: Joi.boolean(),
});
