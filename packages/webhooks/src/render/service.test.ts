import { sampleEnvelope } from '../__tests__/fixtures';
import { canonicalJson } from '../canonical-json';
import { renderPayload } from './index';

describe('service format', () => {
  it('is the envelope as canonical JSON, application/json', () => {
    const envelope = sampleEnvelope('finding.created');
    const { body, contentType } = renderPayload('service', envelope);
    expect(contentType).toBe('application/json');
    expect(body.toString('utf8')).toBe(canonicalJson(envelope));
    expect(JSON.parse(body.toString('utf8'))).toEqual(envelope);
  });

  it('has the SPEC envelope fields and nothing else at top level', () => {
    const parsed = JSON.parse(renderPayload('service', sampleEnvelope('report.ready')).body.toString('utf8'));
    expect(Object.keys(parsed)).toEqual(['created_at', 'data', 'event_id', 'id', 'organization_id', 'type']);
    expect(parsed.id).toMatch(/^whdel_/);
    expect(parsed.event_id).toMatch(/^event_/);
    expect(parsed.data.kind).toBe('report.ready');
    expect(parsed.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('has no whitespace outside strings', () => {
    const text = renderPayload('service', sampleEnvelope('finding.created')).body.toString('utf8');
    expect(text).not.toMatch(/[\n\r\t]/);
    expect(text.startsWith('{"created_at":')).toBe(true);
  });
});
