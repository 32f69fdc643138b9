import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';

const description = () => Joi.string().trim().max(5000).allow('', null);

export const createProjectBody = Joi.object({ name: name().required(), description: description() });

export const updateProjectBody = Joi.object({
  name: name(),
  description: description(),
  archived: Joi.boolean().strict(),
}).min(1);

export const listProjectsQuery = Joi.object({
  ...paginationQuery,
  archived: Joi.boolean(),
});
