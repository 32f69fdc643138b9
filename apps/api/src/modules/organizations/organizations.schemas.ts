import Joi from 'joi';
import { name } from '../../http/validate';

export const updateOrganizationBody = Joi.object({ name: name().required() });

// Deleting an organization is irreversible: the caller repeats its exact name.
export const deleteOrganizationBody = Joi.object({ confirm: Joi.string().max(200).required() });

export const transferOwnershipBody = Joi.object({ user_id: Joi.string().min(1).max(200).required() });
