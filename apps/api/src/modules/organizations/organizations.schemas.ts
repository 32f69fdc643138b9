import Joi from 'joi';
import { sensitiveChangePassword } from '../auth/auth.schemas';
import { name } from '../../http/validate';
import { id, timestamp } from '../../http/responses';

export const updateOrganizationBody = Joi.object({ name: name().required() });

// Deleting an organization is irreversible: the caller repeats its exact name.
export const deleteOrganizationBody = Joi.object({
  confirm: Joi.string().max(200).required(),
  current_password: sensitiveChangePassword(),
});

export const transferOwnershipBody = Joi.object({
  user_id: Joi.string().min(1).max(200).required(),
  current_password: sensitiveChangePassword(),
});

export const organizationResponse = Joi.object({
  id: id('org'),
  name: Joi.string(),
  created_at: timestamp(),
  updated_at: timestamp(),
});

export const transferOwnershipResponse = Joi.object({
  owner_id: id('usr'),
  previous_owner_id: id('usr'),
  previous_owner_role: Joi.string().valid('admin'),
});
