import Joi from 'joi';
import { paginationQuery } from '../../http/validate';
import { id, timestamp } from '../../http/responses';

const subjectId = () => Joi.string().min(1).max(200);

export const createGrantBody = Joi.object({
  user_id: subjectId(),
  team_id: subjectId(),
  access: Joi.string().valid('read', 'write').required(),
}).xor('user_id', 'team_id');

export const listGrantsQuery = Joi.object(paginationQuery);

// A grant is on a project or on an assessment (never both), to a user or to a team (never both).
const grantSubjects = (target: { project_id: Joi.Schema; assessment_id: Joi.Schema }) => {
  const common = { id: id('grant'), ...target, access: Joi.string().valid('read', 'write'), created_at: timestamp() };
  return Joi.alternatives().try(
    Joi.object({ ...common, subject_type: Joi.string().valid('user'), user_id: id('usr'), team_id: Joi.valid(null) }),
    Joi.object({ ...common, subject_type: Joi.string().valid('team'), user_id: Joi.valid(null), team_id: id('team') }),
  );
};

export const projectGrantResponse = grantSubjects({ project_id: id('prj'), assessment_id: Joi.valid(null) });

export const assessmentGrantResponse = grantSubjects({ project_id: Joi.valid(null), assessment_id: id('asm') });

export const grantResponseFor = (kind: 'project' | 'assessment') =>
  kind === 'project' ? projectGrantResponse : assessmentGrantResponse;
