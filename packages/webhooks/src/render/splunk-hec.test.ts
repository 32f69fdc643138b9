import { allSampleEnvelopes, CREATED_AT_MS, sampleEnvelope } from '../__tests__/fixtures';
import { buildEnvelope } from '../envelope';
import { renderPayload } from './index';
import { splunkTime } from './splunk-hec';

function render(envelope = sampleEnvelope('finding.created'), options = {}) {
  const rendered = renderPayload('splunk_hec', envelope, options);
  return { ...rendered, text: rendered.body.toString('utf8'), parsed: JSON.parse(rendered.body.toString('utf8')) };
}

describe('splunk_hec format', () => {
  it('has exactly the HEC event keys; index only when set', () => {
    expect(Object.keys(render().parsed).sort()).toEqual(['event', 'fields', 'host', 'source', 'sourcetype', 'time']);
    expect(Object.keys(render(undefined, { splunkIndex: 'security' }).parsed).sort()).toEqual([
      'event', 'fields', 'host', 'index', 'source', 'sourcetype', 'time',
    ]);
    expect(render(undefined, { splunkIndex: 'security' }).parsed.index).toBe('security');
    expect(render(undefined, { splunkIndex: '' }).parsed).not.toHaveProperty('index');
    expect(render(undefined, { splunkIndex: null }).parsed).not.toHaveProperty('index');
  });

  it('is canonical JSON, application/json', () => {
    const { contentType, text } = render();
    expect(contentType).toBe('application/json');
    expect(text).toMatch(/^\{"event":\{/);
    expect(text).not.toMatch(/\n/);
  });

  it('has time as a number of epoch seconds with exactly three decimals', () => {
    const { text, parsed } = render();
    expect(typeof parsed.time).toBe('number');
    expect(parsed.time).toBeCloseTo(CREATED_AT_MS / 1000, 3);
    expect(Math.round(parsed.time * 1000)).toBe(CREATED_AT_MS);
    expect(text).toMatch(/"time":1793614530\.123\}$/);
  });

  it.each([
    ['2026-11-02T10:15:30.000Z', '1793614530.000'],
    ['2026-11-02T10:15:30.005Z', '1793614530.005'],
    ['2026-11-02T10:15:30.050Z', '1793614530.050'],
    ['1970-01-01T00:00:00.000Z', '0.000'],
    ['1969-12-31T23:59:59.500Z', '-1.500'],
  ])('writes %s as %s', (iso, text) => {
    expect(splunkTime(iso).text).toBe(text);
    const envelope = buildEnvelope({ deliveryId: 'whdel_1', eventId: 'event_1', type: 'webhook.test', createdAt: iso, organizationId: 'o' });
    if (!text.startsWith('-')) expect(render(envelope).text).toContain(`"time":${text}`);
  });

  it('uses host, source and sourcetype from options, with defaults', () => {
    expect(render().parsed).toMatchObject({ host: 'security-assessment-service', source: 'service:webhooks', sourcetype: '_json' });
    expect(render(undefined, { host: 'api-1', source: 'svc', sourcetype: 'svc:webhook' }).parsed).toMatchObject({
      host: 'api-1',
      source: 'svc',
      sourcetype: 'svc:webhook',
    });
  });

  it('carries the whole envelope as event', () => {
    for (const envelope of allSampleEnvelopes()) {
      expect(render(envelope).parsed.event).toEqual(envelope);
    }
  });

  it('has fields with string values only: event type, severity when present, ids', () => {
    for (const envelope of allSampleEnvelopes()) {
      const { fields } = render(envelope).parsed;
      for (const value of Object.values(fields)) expect(typeof value).toBe('string');
      expect(fields.event_type).toBe(envelope.type);
      expect(fields.organization_id).toBe(envelope.organization_id);
      expect(fields.event_id).toBe(envelope.event_id);
      expect(fields.delivery_id).toBe(envelope.id);
      if (typeof envelope.data.severity === 'string') expect(fields.severity).toBe(envelope.data.severity);
      else expect(fields).not.toHaveProperty('severity');
    }
    expect(render(sampleEnvelope('finding.status_changed')).parsed.fields).toEqual({
      event_type: 'finding.status_changed',
      event_id: sampleEnvelope('finding.status_changed').event_id,
      delivery_id: sampleEnvelope('finding.status_changed').id,
      organization_id: 'org_01JCORGANIZATION',
      severity: 'medium',
      status: 'fixed',
      previous_status: 'open',
      finding_id: 'fnd_03',
      assessment_id: 'asm_01',
      project_id: 'prj_01',
    });
  });

  it('leaves non-string data values out of fields', () => {
    const { fields } = render(sampleEnvelope('finding.created', { severity: 9, status: null, project_id: { x: 1 }, finding_id: '' })).parsed;
    expect(fields).not.toHaveProperty('severity');
    expect(fields).not.toHaveProperty('status');
    expect(fields).not.toHaveProperty('project_id');
    expect(fields).not.toHaveProperty('finding_id');
  });
});
