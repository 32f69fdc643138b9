import Joi from 'joi';
import { paginationQuery } from '../../http/validate';

const subjectId = () => Joi.string().min(1).max(200);

export const createGrantBody = Joi.object({
  user_id: subjectId(),
  team_id: subjectId(),
  access: Joi.string().valid('read', 'write').required(),
}).xor('user_id', 'team_id');

export const listGrantsQuery = Joi.object(paginationQuery);
