import { EVENT_TYPES } from './events';
import { buildSentinelRecord } from './render/sentinel';
import { exampleEnvelope, sentinelColumns, sentinelSchema, sentinelStreamName } from './sentinel-schema';

describe('sentinel schema', () => {
  it.each(EVENT_TYPES)('has a column for every key of a %s record, nothing more', (type) => {
    const record = buildSentinelRecord(exampleEnvelope(type));
    expect(sentinelColumns([type]).map((c) => c.name)).toEqual(Object.keys(record));
  });

  it('types columns from the rendered values', () => {
    const types = Object.fromEntries(sentinelColumns(EVENT_TYPES).map((c) => [c.name, c.type]));
    expect(types).toMatchObject({
      TimeGenerated: 'datetime',
      EventType: 'string',
      FindingsCount: 'long',
      FindingsBySeverityHigh: 'long',
      SlaDays: 'long',
      SpentCredits: 'real',
    });
  });

  it('merges the columns of several event types without duplicates, in a stable order', () => {
    const names = sentinelColumns(EVENT_TYPES).map((c) => c.name);
    expect(new Set(names.map((n) => n.toLowerCase())).size).toBe(names.length);
    expect(sentinelColumns([...EVENT_TYPES].reverse())).toEqual(sentinelColumns(EVENT_TYPES));
    expect(names.slice(0, 5)).toEqual(['TimeGenerated', 'DeliveryId', 'EventId', 'EventType', 'OrganizationId']);
  });

  it('declares the URL stream and a data flow into its custom table', () => {
    const url = `https://dce.example/dataCollectionRules/dcr-${'a'.repeat(32)}/streams/Custom-Findings?api-version=2023-01-01`;
    expect(sentinelStreamName(url)).toBe('Custom-Findings');
    const schema = sentinelSchema(['webhook.test'], url);
    expect(schema.stream_declarations).toEqual({ 'Custom-Findings': { columns: schema.columns } });
    expect(schema.data_flows).toEqual([
      { streams: ['Custom-Findings'], destinations: ['logAnalyticsWorkspace'], transformKql: 'source', outputStream: 'Custom-Findings_CL' },
    ]);
  });
});
