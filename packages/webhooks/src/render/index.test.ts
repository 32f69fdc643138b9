import { allSampleEnvelopes, sampleEnvelope } from '../__tests__/fixtures';
import { PAYLOAD_FORMATS, type PayloadFormat } from '../events';
import { DEFAULT_RENDER_OPTIONS, RENDERERS, renderPayload, resolveRenderOptions } from './index';

/** The Content-Type each format must be sent with. */
const contentTypeFor = (format: PayloadFormat) => (format === 'cef' ? 'text/plain; charset=utf-8' : 'application/json');

describe('renderPayload registry', () => {
  it('has exactly one renderer per payload format', () => {
    expect(Object.keys(RENDERERS).sort()).toEqual([...PAYLOAD_FORMATS].sort());
  });

  it.each(PAYLOAD_FORMATS)('%s renders every event type to a Buffer with the right content type', (format) => {
    for (const envelope of allSampleEnvelopes()) {
      const rendered = renderPayload(format, envelope);
      expect(Buffer.isBuffer(rendered.body)).toBe(true);
      expect(rendered.body.length).toBeGreaterThan(0);
      expect(rendered.contentType).toBe(contentTypeFor(format));
    }
  });

  it('uses application/json for the JSON formats and text/plain for CEF', () => {
    expect(contentTypeFor('service')).toBe('application/json');
    expect(contentTypeFor('splunk_hec')).toBe('application/json');
    expect(contentTypeFor('microsoft_sentinel')).toBe('application/json');
    expect(contentTypeFor('cef')).toBe('text/plain; charset=utf-8');
  });

  it.each(PAYLOAD_FORMATS)('%s is deterministic: same input, same bytes, whatever the key order', (format) => {
    const a = sampleEnvelope('finding.created');
    const reordered = JSON.parse(JSON.stringify({ data: a.data, organization_id: a.organization_id, created_at: a.created_at, type: a.type, event_id: a.event_id, id: a.id }));
    const reversedData = Object.fromEntries(Object.entries(a.data).reverse());
    expect(renderPayload(format, a).body.equals(renderPayload(format, a).body)).toBe(true);
    expect(renderPayload(format, a).body.equals(renderPayload(format, reordered).body)).toBe(true);
    expect(renderPayload(format, a).body.equals(renderPayload(format, { ...a, data: { ...reversedData, kind: a.type } }).body)).toBe(true);
  });

  it('refuses an unknown format', () => {
    expect(() => renderPayload('xml' as PayloadFormat, sampleEnvelope('webhook.test'))).toThrow(/Unknown payload format/);
  });
});

describe('resolveRenderOptions', () => {
  it('fills the documented defaults', () => {
    expect(resolveRenderOptions()).toEqual(DEFAULT_RENDER_OPTIONS);
    expect(DEFAULT_RENDER_OPTIONS.vendor).toBe('Service');
    expect(DEFAULT_RENDER_OPTIONS.product).toBe('Security Assessment Service');
    expect(DEFAULT_RENDER_OPTIONS.splunkIndex).toBeNull();
  });

  it('keeps given values and treats an empty index as none', () => {
    expect(resolveRenderOptions({ splunkIndex: 'security', host: 'h', vendor: 'V' })).toMatchObject({ splunkIndex: 'security', host: 'h', vendor: 'V', product: 'Security Assessment Service' });
    expect(resolveRenderOptions({ splunkIndex: '' }).splunkIndex).toBeNull();
    expect(resolveRenderOptions({ splunkIndex: null }).splunkIndex).toBeNull();
  });

  it('refuses empty or non-string values', () => {
    expect(() => resolveRenderOptions({ host: '' })).toThrow(TypeError);
    expect(() => resolveRenderOptions({ vendor: 5 as unknown as string })).toThrow(TypeError);
    expect(() => resolveRenderOptions({ splunkIndex: 5 as unknown as string })).toThrow(TypeError);
  });
});
