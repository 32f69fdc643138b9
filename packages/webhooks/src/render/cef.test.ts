import { spawnSync } from 'node:child_process';
import { allSampleEnvelopes, CREATED_AT_MS, NASTY_STRINGS, sampleEnvelope } from '../__tests__/fixtures';
import { buildEnvelope, type Envelope } from '../envelope';
import { describeEventType, EVENT_TYPES, FINDING_EVENT_TYPES } from '../events';
import { renderPayload } from './index';
import {
  buildCefLine,
  CEF_EVENT_SEVERITY,
  cefEventName,
  cefExtensionPairs,
  cefSeverity,
  escapeCefExtensionValue,
  escapeCefHeader,
} from './cef';
import { resolveRenderOptions, type RenderOptions } from './options';

import { INSTALL_HINT, lognormalize } from '../__tests__/lognormalize';

function line(envelope: Envelope, options: RenderOptions = {}): string {
  return renderPayload('cef', envelope, options).body.toString('utf8');
}

describe('lognormalizer', () => {
  it('is installed (the CEF checks need it)', () => {
    const result = spawnSync('lognormalizer', ['-V'], { encoding: 'utf8' });
    if (result.error) throw new Error(INSTALL_HINT);
    expect(result.status === 0 || /liblognorm|lognormalizer/i.test(`${result.stdout}${result.stderr}`)).toBe(true);
  });
});

describe('cef format', () => {
  it('is one line, text/plain; charset=utf-8, no syslog prefix', () => {
    for (const envelope of allSampleEnvelopes()) {
      const rendered = renderPayload('cef', envelope);
      expect(rendered.contentType).toBe('text/plain; charset=utf-8');
      const text = rendered.body.toString('utf8');
      expect(text.startsWith('CEF:0|Service|Security Assessment Service|1.0|')).toBe(true);
      expect(text).not.toMatch(/[\r\n]/);
    }
  });

  it('parses with lognormalizer for every event type, header and extension equal to the input', () => {
    const envelopes = allSampleEnvelopes();
    const parsed = lognormalize(envelopes.map((e) => line(e)));
    envelopes.forEach((envelope, i) => {
      const cef = parsed[i];
      expect(cef.DeviceVendor).toBe('Service');
      expect(cef.DeviceProduct).toBe('Security Assessment Service');
      expect(cef.DeviceVersion).toBe('1.0');
      expect(cef.SignatureID).toBe(envelope.type);
      expect(cef.Name).toBe(cefEventName(envelope));
      expect(cef.Severity).toBe(String(cefSeverity(envelope)));
      expect(cef.Extensions).toEqual(Object.fromEntries(cefExtensionPairs(envelope)));
      expect(cef.Extensions.rt).toBe(String(CREATED_AT_MS));
      expect(cef.Extensions.externalId).toBe(envelope.event_id);
      expect(cef.Extensions.cs1).toBe(envelope.id);
      expect(cef.Extensions.cs1Label).toBe('deliveryId');
      expect(cef.Extensions.cs2).toBe(envelope.organization_id);
      expect(cef.Extensions.cs2Label).toBe('organizationId');
    });
  });

  it('maps the documented data fields to cs3..cs6 and flexString1/2', () => {
    const envelope = sampleEnvelope('finding.status_changed');
    const [cef] = lognormalize([line(envelope)]);
    expect(cef.Extensions).toEqual({
      rt: String(CREATED_AT_MS),
      externalId: envelope.event_id,
      cat: 'finding',
      msg: 'Open redirect',
      cs1: envelope.id,
      cs1Label: 'deliveryId',
      cs2: envelope.organization_id,
      cs2Label: 'organizationId',
      cs3: 'prj_01',
      cs3Label: 'projectId',
      cs4: 'asm_01',
      cs4Label: 'assessmentId',
      cs5: 'fnd_03',
      cs5Label: 'findingId',
      cs6: 'fixed',
      cs6Label: 'findingStatus',
      flexString1: 'open',
      flexString1Label: 'previousStatus',
      flexString2: 'medium',
      flexString2Label: 'findingSeverity',
    });
    const [plain] = lognormalize([line(sampleEnvelope('webhook.test'))]);
    expect(plain.Extensions.msg).toBe('This is a test delivery');
    expect(plain.Extensions).not.toHaveProperty('cs3');
    expect(plain.Extensions).not.toHaveProperty('cs3Label');
  });

  it('writes rt as epoch milliseconds', () => {
    expect(line(sampleEnvelope('report.ready'))).toContain(`rt=${CREATED_AT_MS} `);
  });

  it.each(NASTY_STRINGS.map((s) => [s]))('round-trips the extension value %j through lognormalizer', (nasty) => {
    const envelope = sampleEnvelope('finding.created', { title: nasty, project_id: nasty, assessment_id: `${nasty}=`, finding_id: `=${nasty}`, status: nasty });
    const [cef] = lognormalize([line(envelope)]);
    expect(cef.Extensions.msg).toBe(nasty);
    expect(cef.Extensions.cs3).toBe(nasty);
    expect(cef.Extensions.cs4).toBe(`${nasty}=`);
    expect(cef.Extensions.cs5).toBe(`=${nasty}`);
    expect(cef.Extensions.cs6).toBe(nasty);
    expect(cef.Extensions.cs3Label).toBe('projectId');
    expect(cef.Extensions.cs6Label).toBe('findingStatus');
  });

  it('round-trips all nasty strings together, and in header fields', () => {
    const all = NASTY_STRINGS.join(' ');
    const headerNasty = NASTY_STRINGS.filter((s) => !/[\r\n]/.test(s)).join(' ');
    const options = { vendor: headerNasty, product: 'Pro|duct\\', version: 'v=1|2' };
    const envelope = sampleEnvelope('finding.confirmed', { title: all, project_id: all });
    const [cef] = lognormalize([line(envelope, options)]);
    expect(cef.DeviceVendor).toBe(headerNasty);
    expect(cef.DeviceProduct).toBe('Pro|duct\\');
    expect(cef.DeviceVersion).toBe('v=1|2');
    expect(cef.SignatureID).toBe('finding.confirmed');
    expect(cef.Severity).toBe('8');
    expect(cef.Extensions.msg).toBe(all);
    expect(cef.Extensions.cs3).toBe(all);
  });

  it('turns line breaks in header fields into spaces', () => {
    const [cef] = lognormalize([line(sampleEnvelope('webhook.test'), { vendor: 'Multi\nLine\r\nVendor' })]);
    expect(cef.DeviceVendor).toBe('Multi Line Vendor');
  });

  it('replaces other control characters with U+FFFD', () => {
    const [cef] = lognormalize([line(sampleEnvelope('finding.created', { title: 'a\u0000b\u0007c\u007fd\u001be' }))]);
    expect(cef.Extensions.msg).toBe('a\ufffdb\ufffdc\ufffdd\ufffde');
  });

  it('cuts very long values to the CEF limits (externalId 40, msg 1023, csN 4000), never inside a character', () => {
    const long = 'é😀x'.repeat(3000); // 12 000 UTF-16 units
    const longWithEscapes = '\\=\n|'.repeat(3000);
    const envelope = {
      ...sampleEnvelope('finding.created', { title: long, project_id: long, assessment_id: longWithEscapes, finding_id: 'f'.repeat(5000) }),
      event_id: `event_${'e'.repeat(100)}`,
    };
    const [cef] = lognormalize([line(envelope)]);
    expect(cef.Extensions.externalId).toBe(envelope.event_id.slice(0, 40));
    expect(cef.Extensions.msg.length).toBeLessThanOrEqual(1023);
    expect(cef.Extensions.msg.length).toBeGreaterThanOrEqual(1022);
    expect(long.startsWith(cef.Extensions.msg)).toBe(true);
    expect(cef.Extensions.cs3.length).toBeLessThanOrEqual(4000);
    expect(long.startsWith(cef.Extensions.cs3)).toBe(true);
    expect(cef.Extensions.cs4).toBe(longWithEscapes.slice(0, 4000));
    expect(cef.Extensions.cs5).toBe('f'.repeat(4000));
    for (const value of Object.values(cef.Extensions)) expect(value).not.toContain('\ufffd');
  });

  it('maps finding severities to 10/8/5/3/1', () => {
    const expected: Record<string, string> = { critical: '10', high: '8', medium: '5', low: '3', info: '1' };
    const cases = FINDING_EVENT_TYPES.flatMap((type) => Object.keys(expected).map((severity) => ({ type, severity })));
    const parsed = lognormalize(cases.map(({ type, severity }) => line(sampleEnvelope(type, { severity }))));
    cases.forEach(({ severity }, i) => expect(parsed[i].Severity).toBe(expected[severity]));
    expect(cefSeverity(sampleEnvelope('finding.created', { severity: 'unknown' }))).toBe(5);
    expect(cefSeverity(sampleEnvelope('finding.created', { severity: undefined }))).toBe(5);
  });

  it('gives every other event its documented fixed severity, whatever its data says', () => {
    const others = EVENT_TYPES.filter((t) => !(FINDING_EVENT_TYPES as readonly string[]).includes(t));
    expect(Object.keys(CEF_EVENT_SEVERITY).sort()).toEqual([...others].sort());
    for (const type of others) {
      const severity = cefSeverity(sampleEnvelope(type, { severity: 'critical' }));
      expect(severity).toBe(CEF_EVENT_SEVERITY[type as keyof typeof CEF_EVENT_SEVERITY]);
      expect(Number.isInteger(severity) && severity >= 0 && severity <= 10).toBe(true);
    }
    expect(cefSeverity(sampleEnvelope('monitoring.regression'))).toBe(8);
    expect(cefSeverity(sampleEnvelope('webhook.test'))).toBe(0);
  });

  it('is deterministic', () => {
    const envelope = sampleEnvelope('finding.created', { title: NASTY_STRINGS.join('') });
    expect(line(envelope)).toBe(line(JSON.parse(JSON.stringify(envelope))));
    expect(buildCefLine(envelope, resolveRenderOptions())).toBe(line(envelope));
  });

  it('escapes exactly as documented', () => {
    expect(escapeCefHeader('a\\b|c=d\ne')).toBe('a\\\\b\\|c=d e');
    expect(escapeCefExtensionValue('a\\b|c=d\ne\rf')).toBe('a\\\\b|c\\=d\\ne\\rf');
    expect(line(sampleEnvelope('finding.created', { title: 'x=y|z\\' }))).toContain('msg=x\\=y|z\\\\ cs1=');
  });
});

describe('labels of status and severity', () => {
  it('keeps cs6 the finding status: an assessment status goes to outcome', () => {
    const completed = buildEnvelope({
      deliveryId: 'whdel_x', eventId: 'event_x', type: 'assessment.completed', createdAt: 0, organizationId: 'org_x',
      data: { assessment_id: 'asm_x', status: 'completed' },
    });
    const pairs = Object.fromEntries(cefExtensionPairs(completed));
    expect(pairs.outcome).toBe('completed');
    expect(pairs).not.toHaveProperty('cs6');
    expect(pairs).not.toHaveProperty('cs6Label');
    const finding = buildEnvelope({
      deliveryId: 'whdel_x', eventId: 'event_x', type: 'monitoring.regression', createdAt: 0, organizationId: 'org_x',
      data: { finding_id: 'fnd_x', severity: 'high' },
    });
    expect(Object.fromEntries(cefExtensionPairs(finding)).flexString2Label).toBe('findingSeverity');
  });

  it('names the scope of spend events in Name and msg', () => {
    const spend = (scope: string) =>
      buildEnvelope({
        deliveryId: 'whdel_x', eventId: 'event_x', type: 'spend.threshold_crossed', createdAt: 0, organizationId: 'org_x',
        data: { limit_id: 'lim_x', scope, project_id: scope === 'project' ? 'prj_x' : null, threshold_credits: '20.00', spent_credits: '21.50' },
      });
    const [project, organization] = lognormalize([line(spend('project')), line(spend('organization'))]);
    expect(project.Name).toBe('Project spend crossed a configured alert threshold');
    expect(project.Extensions.msg).toBe(project.Name);
    expect(organization.Name).toBe('Organization spend crossed a configured alert threshold');
  });
});
