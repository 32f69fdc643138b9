import Joi from 'joi';
import { ERASURE_STATUSES } from '@svc/domain';
import { paginationQuery } from '../../http/validate';
import { id, list, nullableString, nullableTimestamp, timestamp } from '../../http/responses';

export const fileErasureBody = Joi.object({
  user_id: id('usr').description('The person to erase: a member or a former member of the organization'),
  email: Joi.string()
    .trim()
    .email({ tlds: false })
    .max(320)
    .description('Or a person by e-mail: the account the organization knows with this address, else an invitee, share grantee or notification recipient without one'),
})
  .xor('user_id', 'email')
  .messages({ 'object.xor': 'Give either "user_id" or "email", not both.', 'object.missing': 'Give "user_id" or "email": whom to erase.' });

export const listErasureQuery = Joi.object({
  ...paginationQuery,
  status: Joi.string().valid(...ERASURE_STATUSES),
});

export const candidatesQuery = Joi.object({
  q: Joi.string().trim().min(2).max(200).required().description('Part of the name or e-mail address (2 characters or more)'),
});

export const candidateResponse = Joi.object({
  user_id: id('usr').allow(null).description('null: a person without an account, erased by e-mail'),
  name: nullableString(),
  email: Joi.string(),
  kind: Joi.string().valid('member', 'former_member', 'invitee', 'share_grantee', 'recipient'),
  role: nullableString().description('The member\'s role; the owner cannot be erased'),
});
export const candidatesResponse = list(candidateResponse);

const columnCount = Joi.object({ table: Joi.string(), column: Joi.string(), rows: Joi.number().integer() });

const preview = Joi.object({
  membership: Joi.boolean().description('The person is a member and would be removed'),
  account: Joi.boolean().description('The account itself would be erased (a user who belongs to no other organization)'),
  name_searched: Joi.boolean().description('The name is searched in free text (a full name); otherwise only the exact e-mail is'),
  audit_entries: Joi.number().integer().description('The person\'s audit entries that lose IP and user agent'),
  reports: Joi.number().integer().description('Report PDFs rendered from text naming the person: regenerated'),
  columns: Joi.array().items(
    columnCount.keys({
      samples: Joi.array().items(Joi.object({ id: Joi.string(), excerpt: Joi.string() })).description('A few excerpts, the person masked as [name] or [e-mail]'),
    }),
  ),
})
  .allow(null)
  .description('What the erasure would change, written by the worker; null while previewing');

const receipt = Joi.object({
  membership_removed: Joi.boolean().description('The person was a member and was removed'),
  account_erased: Joi.boolean().description('The account itself was erased (the person belonged to no other organization)'),
  sessions_revoked: Joi.number().integer(),
  api_keys_revoked: Joi.number().integer(),
  invitations_revoked: Joi.number().integer().description('Pending invitations the person had sent in the organization, revoked with their membership'),
  audit_entries_scrubbed: Joi.number().integer().description('The person\'s audit entries: actor label pseudonymized, IP and user agent cleared'),
  late_audit_entries_scrubbed: Joi.number()
    .integer()
    .optional()
    .description('Present once the follow-up ran (15 minutes after completion): the entries that requests already under way as the person wrote after it, scrubbed the same way'),
  reports_regenerated: Joi.array().items(id('rpt')).description('Reports whose PDF named the person: rendered again (pending meanwhile; their live share links answer 409 saying so until ready)'),
  replaced: Joi.array().items(columnCount).description('Every column where the name or e-mail was replaced, with the rows changed'),
}).allow(null);

export const erasureResponse = Joi.object({
  id: id('era'),
  subject: Joi.string().valid('user', 'email').description('A user account, or a person known by e-mail only'),
  user_id: id('usr').allow(null),
  status: Joi.string().valid(...ERASURE_STATUSES),
  pseudonym: Joi.object({ name: Joi.string(), email: Joi.string() }).description('What replaces the name and e-mail'),
  requested_by_user_id: id('usr').allow(null),
  confirmed_by_user_id: id('usr').allow(null),
  attempts: Joi.number().integer(),
  error: nullableString(),
  preview,
  progress_step: nullableString().description('While erasing (or failed): the step reached, e.g. free_text:webhook_attempts'),
  receipt,
  created_at: timestamp(),
  confirmed_at: nullableTimestamp(),
  completed_at: nullableTimestamp(),
  cancelled_at: nullableTimestamp(),
});
