import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';
import { id, nullableString, nullableTimestamp, timestamp } from '../../http/responses';
import { projectSourceResponse } from '../source/source.schemas';

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

export const projectResponse = Joi.object({
  id: id('prj'),
  name: Joi.string(),
  description: nullableString(),
  archived: Joi.boolean(),
  archived_at: nullableTimestamp().description('When the project was first archived; null unless it is archived'),
  source: projectSourceResponse,
  created_at: timestamp(),
  updated_at: timestamp(),
});
