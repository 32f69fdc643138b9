import Joi from 'joi';
import { sensitiveChangePassword } from '../auth/auth.schemas';
import { isoTimestamp, name, paginationQuery } from '../../http/validate';
import { id, nullableTimestamp, timestamp } from '../../http/responses';

export const createApiKeyBody = Joi.object({
  name: name().required(),
  scopes: Joi.array().items(Joi.string().max(100)).min(1).max(200).required(),
  expires_at: isoTimestamp(),
  current_password: sensitiveChangePassword(),
});

export const listApiKeysQuery = Joi.object(paginationQuery);

export const apiKeyIdParams = Joi.object({ id: Joi.string().max(100).required() });

export const apiKeyResponse = Joi.object({
  id: id('key'),
  name: Joi.string(),
  prefix: Joi.string().pattern(/^sk-svc-/),
  scopes: Joi.array().items(Joi.string()),
  user_id: id('usr'),
  expires_at: nullableTimestamp(),
  last_used_at: nullableTimestamp(),
  revoked_at: nullableTimestamp(),
  created_at: timestamp(),
});

export const createdApiKeyResponse = apiKeyResponse.keys({ key: Joi.string().pattern(/^sk-svc-/) });
