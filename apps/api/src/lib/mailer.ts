// Outgoing mail lives in @svc/mail (the worker sends API-key expiry warnings too); re-exported for the API.
export { createMailer, type MailMessage, type Mailer, type MailerOptions } from '@svc/mail';
