// Unit tests of what the notification target form sends.
import { emptyTargetForm, targetBody, type TargetFormState } from './target-body';

const form = (over: Partial<TargetFormState> = {}): TargetFormState => ({
  ...emptyTargetForm(),
  name: ' Security channel ',
  url: ' https://hooks.slack.com/services/T/B/x ',
  events: ['finding.created'],
  ...over,
});

describe('targetBody', () => {
  it('sends kind, trimmed name and URL, events, and no severity filter when none is typed', () => {
    expect(targetBody(form())).toEqual({
      body: { kind: 'slack', name: 'Security channel', url: 'https://hooks.slack.com/services/T/B/x', events: ['finding.created'], severity_filter: null },
    });
  });

  it('splits severities and recipients on commas, spaces and line breaks, without duplicates', () => {
    const built = targetBody(form({ kind: 'email', severity: 'critical, high', recipients: 'a@example.com,\nb@example.com a@example.com' }));
    expect(built).toEqual({
      body: { kind: 'email', name: 'Security channel', events: ['finding.created'], severity_filter: ['critical', 'high'], recipients: ['a@example.com', 'b@example.com'] },
    });
  });

  it('on an edit sends no kind, and the URL or recipients only when typed', () => {
    expect(targetBody(form({ url: '' }), true)).toEqual({ body: { name: 'Security channel', events: ['finding.created'], severity_filter: null } });
    expect(targetBody(form({ kind: 'email', recipients: '' }), true)).toEqual({ body: { name: 'Security channel', events: ['finding.created'], severity_filter: null } });
  });

  it('names what is missing', () => {
    expect(targetBody(form({ name: ' ' }))).toEqual({ problem: 'Give the target a name.' });
    expect(targetBody(form({ events: [] }))).toEqual({ problem: 'Choose at least one event.' });
    expect(targetBody(form({ url: '' }))).toEqual({ problem: 'Paste the Slack incoming webhook URL.' });
    expect(targetBody(form({ kind: 'teams', url: '' }))).toEqual({ problem: 'Paste the Teams workflow webhook URL.' });
    expect(targetBody(form({ kind: 'email' }))).toEqual({ problem: 'Add at least one e-mail address.' });
  });
});
