import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';
import { id, nullableString, timestamp } from '../../http/responses';
import { sensitiveChangePassword } from '../auth/auth.schemas';

export const INTEGRATION_KINDS = ['github', 'slack'] as const;
export type IntegrationKind = (typeof INTEGRATION_KINDS)[number];

const secret = () => Joi.string().trim().min(8).max(1024).pattern(/^\S+$/, 'no whitespace');

const github = Joi.object({
  kind: Joi.string().valid('github').required(),
  name: name().required(),
  token: secret().description('A personal access token or fine-grained token with repository read access (write-only)'),
  app_installation_id: Joi.string().pattern(/^[1-9][0-9]{0,19}$/, 'a numeric id').description('A GitHub App installation id'),
  base_url: Joi.string().trim().max(2048).allow(null).description('GitHub Enterprise API base URL, e.g. https://ghe.example.com/api/v3; omit for github.com'),
  current_password: sensitiveChangePassword(),
}).xor('token', 'app_installation_id');

const slack = Joi.object({
  kind: Joi.string().valid('slack').required(),
  name: name().required(),
  bot_token: secret().pattern(/^xoxb-/, 'a Slack bot token (xoxb-…)').required().description('The workspace bot token (write-only)'),
  workspace_id: Joi.string().pattern(/^T[A-Z0-9]{2,20}$/, 'a Slack team id (T…)').required(),
  current_password: sensitiveChangePassword(),
});

export const connectIntegrationBody = Joi.alternatives()
  .conditional(Joi.object({ kind: Joi.valid('slack').required() }).unknown(), { then: slack, otherwise: github })
  .description('GitHub: {kind, name, token | app_installation_id, base_url?}; Slack: {kind, name, bot_token, workspace_id}; either with current_password from a session signed in more than 10 minutes ago');

export const listIntegrationsQuery = Joi.object({ ...paginationQuery, kind: Joi.string().valid(...INTEGRATION_KINDS) });

export const integrationResponse = Joi.object({
  id: id('int'),
  kind: Joi.string().valid(...INTEGRATION_KINDS),
  name: Joi.string(),
  auth_method: Joi.string().valid('token', 'app_installation', 'bot_token'),
  credential_hint: nullableString().description('The last four characters of the stored credential; the credential itself is never returned'),
  app_installation_id: nullableString(),
  base_url: nullableString(),
  workspace_id: nullableString(),
  status: Joi.string().valid('connected'),
  team_ids: Joi.array().items(id('team')).description('Teams whose projects use this integration by default'),
  created_at: timestamp(),
  updated_at: timestamp(),
});

export const projectIntegrationsResponse = Joi.object({
  data: Joi.array().items(
    Joi.object({
      kind: Joi.string().valid(...INTEGRATION_KINDS),
      integration: integrationResponse.allow(null),
      source: Joi.string().valid('team', 'organization').allow(null).description('team: bound to a team with access to the project; organization: the only one of its kind'),
      team_id: id('team').allow(null),
    }),
  ),
});
