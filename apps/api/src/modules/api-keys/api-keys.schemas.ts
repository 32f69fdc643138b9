import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';

export const createApiKeyBody = Joi.object({
  name: name().required(),
  scopes: Joi.array().items(Joi.string().max(100)).min(1).max(200).required(),
  expires_at: Joi.date().iso(),
});

export const listApiKeysQuery = Joi.object(paginationQuery);

export const apiKeyIdParams = Joi.object({ id: Joi.string().max(100).required() });
