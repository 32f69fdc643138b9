import Joi from 'joi';

// null turns a rule off; a field left out keeps its current value.
export const updateKeyPolicyBody = Joi.object({
  enabled: Joi.boolean().required(),
  require_expiration: Joi.boolean(),
  max_lifetime_days: Joi.number().integer().min(1).max(3650).allow(null),
  warn_days_before: Joi.number().integer().min(1).max(365).allow(null),
  inactivity_days: Joi.number().integer().min(1).max(3650).allow(null),
});

const days = () => Joi.number().integer().allow(null);
export const keyPolicyResponse = Joi.object({
  enabled: Joi.boolean(),
  require_expiration: Joi.boolean(),
  max_lifetime_days: days(),
  warn_days_before: days(),
  inactivity_days: days(),
});
