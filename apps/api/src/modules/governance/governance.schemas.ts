import Joi from 'joi';
import { MAX_SLA_DAYS, MIN_SLA_DAYS, SLA_SEVERITIES } from '@svc/domain';

const days = () => Joi.number().integer().strict().min(MIN_SLA_DAYS).max(MAX_SLA_DAYS).allow(null).required();

/** PUT replaces the whole policy: every severity must be given, as whole days or null (no SLA). */
export const putSlaBody = Joi.object(Object.fromEntries(SLA_SEVERITIES.map((s) => [s, days()])));

export const slaPolicyResponse = Joi.object(
  Object.fromEntries(SLA_SEVERITIES.map((s) => [s, Joi.number().integer().allow(null).description(`Days to remediate a ${s} finding; null = no SLA`)])),
);
