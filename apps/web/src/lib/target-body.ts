// What the notification target form sends: a URL for Slack and Teams (write-only: sent only when typed on an edit),
// recipients for e-mail, the events and an optional severity filter. Kept apart from the form for unit tests.

export type TargetKind = 'slack' | 'teams' | 'email';

export interface TargetFormState {
  kind: TargetKind;
  name: string;
  /** Write-only: the webhook URL is the channel's credential; '' leaves the stored one alone on an edit. */
  url: string;
  /** Addresses separated by commas, spaces or line breaks. */
  recipients: string;
  events: string[];
  /** Comma-separated severities; '' means no filter. */
  severity: string;
}

export function emptyTargetForm(kind: TargetKind = 'slack'): TargetFormState {
  return { kind, name: '', url: '', recipients: '', events: [], severity: '' };
}

const words = (text: string) => text.split(/[\s,;]+/).map((w) => w.trim()).filter((w) => w !== '');

export function targetBody(form: TargetFormState, editing = false): { body: Record<string, unknown> } | { problem: string } {
  if (form.name.trim() === '') return { problem: 'Give the target a name.' };
  if (form.events.length === 0) return { problem: 'Choose at least one event.' };
  const severity = words(form.severity);
  const body: Record<string, unknown> = {
    ...(!editing && { kind: form.kind }),
    name: form.name.trim(),
    events: form.events,
    severity_filter: severity.length > 0 ? severity : null,
  };
  if (form.kind === 'email') {
    const recipients = words(form.recipients);
    if (recipients.length === 0 && !editing) return { problem: 'Add at least one e-mail address.' };
    if (recipients.length > 0) body.recipients = [...new Set(recipients)];
  } else {
    const url = form.url.trim();
    if (url === '' && !editing) return { problem: `Paste the ${form.kind === 'slack' ? 'Slack incoming' : 'Teams workflow'} webhook URL.` };
    if (url !== '') body.url = url;
  }
  return { body };
}
