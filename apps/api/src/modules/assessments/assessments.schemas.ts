import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';
import { id, nullableId, nullableString, nullableTimestamp, timestamp } from '../../http/responses';
import { ASSESSMENT_STATES } from './assessment-lifecycle';

const description = () => Joi.string().trim().max(5000).allow('', null);
const notes = () => Joi.string().max(20000).allow('', null);
/** Engine settings: a JSON object (at most 64 KiB serialized), or null. */
const settings = () =>
  Joi.object()
    .unknown(true)
    .allow(null)
    .custom((value, helpers) =>
      value !== null && Buffer.byteLength(JSON.stringify(value)) > 64 * 1024 ? helpers.message({ custom: 'settings must be at most 64 KiB' }) : value,
    );

export const createAssessmentBody = Joi.object({
  name: name().required(),
  description: description(),
  notes: notes(),
  settings: settings(),
});

export const updateAssessmentBody = Joi.object({
  name: name(),
  description: description(),
  notes: notes(),
  settings: settings(),
}).min(1);

export const listAssessmentsQuery = Joi.object({
  ...paginationQuery,
  project_id: Joi.string().min(1).max(200),
  status: Joi.string().valid(...ASSESSMENT_STATES),
  archived: Joi.boolean(),
});

/** The engine's completion report: a text summary or a JSON object (at most 64 KiB serialized). */
export const completeAssessmentBody = Joi.object({
  summary: Joi.alternatives()
    .try(Joi.string().min(1).max(20000), Joi.object().unknown(true))
    .required()
    .custom((value, helpers) =>
      Buffer.byteLength(JSON.stringify(value)) > 64 * 1024 ? helpers.message({ custom: 'summary must be at most 64 KiB' }) : value,
    ),
});

export const failAssessmentBody = Joi.object({ reason: Joi.string().trim().min(1).max(2000).required() });

export const assessmentResponse = Joi.object({
  id: id('asm'),
  project_id: id('prj'),
  name: Joi.string(),
  description: nullableString(),
  status: Joi.string().valid(...ASSESSMENT_STATES),
  archived: Joi.boolean(),
  archived_at: nullableTimestamp().description('When a finished assessment was archived; null unless archived'),
  notes: nullableString(),
  settings: Joi.object().unknown(true).allow(null).description('Engine settings (JSON object), editable while draft'),
  summary: Joi.alternatives()
    .try(Joi.string(), Joi.object().unknown(true))
    .allow(null)
    .description('The engine\'s completion summary; null until completed'),
  failure_reason: nullableString().description('Why the engine failed it; null unless failed'),
  created_by_id: nullableId('usr'),
  queued_at: nullableTimestamp(),
  started_at: nullableTimestamp(),
  finished_at: nullableTimestamp().description('When it completed, failed, was cancelled or emergency-stopped'),
  created_at: timestamp(),
  updated_at: timestamp(),
});
