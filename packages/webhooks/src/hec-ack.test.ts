import {
  hecAckDecision,
  hecAckIdOf,
  hecAckRequestBody,
  hecAckSchedule,
  hecAckStatusOf,
  hecAckUrl,
} from './hec-ack';

describe('hecAckUrl', () => {
  it('is /services/collector/ack on the event URL\'s origin, whatever its path and query', () => {
    expect(hecAckUrl('https://splunk.example.com:8088/services/collector/event')).toBe('https://splunk.example.com:8088/services/collector/ack');
    expect(hecAckUrl('https://splunk.example.com/services/collector')).toBe('https://splunk.example.com/services/collector/ack');
    expect(hecAckUrl('https://hec.example.com/services/collector/event?channel=x#y')).toBe('https://hec.example.com/services/collector/ack');
    expect(hecAckUrl('https://u:p@hec.example.com/a')).toBe('https://hec.example.com/services/collector/ack');
  });
});

describe('hecAckIdOf', () => {
  it('reads the ackId of HEC\'s success answer', () => {
    expect(hecAckIdOf('{"text":"Success","code":0,"ackId":7}')).toBe(7);
    expect(hecAckIdOf(Buffer.from('{"text":"Success","code":0,"ackId":0}'))).toBe(0);
  });

  it.each([
    ['no ackId', '{"text":"Success","code":0}'],
    ['a string ackId', '{"ackId":"7"}'],
    ['a negative ackId', '{"ackId":-1}'],
    ['a fraction', '{"ackId":1.5}'],
    ['an unsafe integer', '{"ackId":9007199254740993}'],
    ['not JSON', 'ok'],
    ['an array', '[{"ackId":1}]'],
    ['null', 'null'],
    ['empty', ''],
  ])('is null for %s', (_label, body) => {
    expect(hecAckIdOf(body)).toBeNull();
  });
});

describe('hecAckRequestBody', () => {
  it('is {"acks":[id]}', () => {
    expect(hecAckRequestBody([12]).toString()).toBe('{"acks":[12]}');
    expect(hecAckRequestBody([3, 4, 9]).toString()).toBe('{"acks":[3,4,9]}');
  });
});

describe('hecAckStatusOf', () => {
  it('reads true as indexed and false as pending, for this id only', () => {
    expect(hecAckStatusOf('{"acks":{"3":true}}', 3)).toBe('indexed');
    expect(hecAckStatusOf('{"acks":{"3":false}}', 3)).toBe('pending');
    expect(hecAckStatusOf('{"acks":{"3":true,"4":false}}', 4)).toBe('pending');
    expect(hecAckStatusOf(Buffer.from('{"acks":{"0":true}}'), 0)).toBe('indexed');
  });

  it.each([
    ['another id only', '{"acks":{"4":true}}'],
    ['a string value', '{"acks":{"3":"true"}}'],
    ['acks as a list', '{"acks":[true]}'],
    ['an error answer', '{"text":"Invalid data channel","code":11}'],
    ['not JSON', '<html>'],
  ])('is unknown for %s', (_label, body) => {
    expect(hecAckStatusOf(body, 3)).toBe('unknown');
  });
});

describe('hecAckSchedule and hecAckDecision', () => {
  const sent = new Date('2026-11-26T10:00:00Z');
  const at = (ms: number) => new Date(sent.getTime() + ms);
  const timing = { timeoutMs: 60_000, pollMs: 5_000 };

  it('sets the deadline one timeout after the POST and the first poll one interval after', () => {
    expect(hecAckSchedule(sent, timing)).toEqual({ deadline: at(60_000), firstPollAt: at(5_000) });
    expect(hecAckSchedule(sent, { timeoutMs: 2_000, pollMs: 5_000 })).toEqual({ deadline: at(2_000), firstPollAt: at(2_000) });
  });

  it('succeeds once indexed, even at or past the deadline', () => {
    expect(hecAckDecision('indexed', at(60_000), at(1_000), 5_000)).toEqual({ action: 'succeed' });
    expect(hecAckDecision('indexed', at(60_000), at(61_000), 5_000)).toEqual({ action: 'succeed' });
  });

  it('polls again while the deadline is ahead, the last poll on the deadline itself', () => {
    expect(hecAckDecision('pending', at(60_000), at(5_000), 5_000)).toEqual({ action: 'poll', at: at(10_000) });
    expect(hecAckDecision('unknown', at(60_000), at(57_000), 5_000)).toEqual({ action: 'poll', at: at(60_000) });
  });

  it('gives up at the deadline when not indexed', () => {
    expect(hecAckDecision('pending', at(60_000), at(60_000), 5_000)).toEqual({ action: 'give_up' });
    expect(hecAckDecision('unknown', at(60_000), at(90_000), 5_000)).toEqual({ action: 'give_up' });
  });

  it('polls again, never gives up, when a worker that is stopping did not ask (not_asked), even past the deadline', () => {
    expect(hecAckDecision('not_asked', at(60_000), at(5_000), 5_000)).toEqual({ action: 'poll', at: at(10_000) });
    expect(hecAckDecision('not_asked', at(60_000), at(60_000), 5_000)).toEqual({ action: 'poll', at: at(65_000) });
    expect(hecAckDecision('not_asked', at(60_000), at(90_000), 5_000, { graceMs: 10_000 })).toEqual({ action: 'poll', at: at(95_000) });
  });

  it("past the deadline, polls again while an 'unknown' ackId is still being asked, for up to the grace", () => {
    const stillAsked = { graceMs: 10_000 };
    expect(hecAckDecision('unknown', at(60_000), at(60_000), 5_000, stillAsked)).toEqual({ action: 'poll', at: at(65_000) });
    expect(hecAckDecision('unknown', at(60_000), at(67_000), 5_000, stillAsked)).toEqual({ action: 'poll', at: at(70_000) });
    expect(hecAckDecision('unknown', at(60_000), at(70_000), 5_000, stillAsked)).toEqual({ action: 'give_up' });
    // Splunk answered 'not indexed': nothing more to wait for.
    expect(hecAckDecision('pending', at(60_000), at(60_000), 5_000, stillAsked)).toEqual({ action: 'give_up' });
    expect(hecAckDecision('indexed', at(60_000), at(69_000), 5_000, stillAsked)).toEqual({ action: 'succeed' });
  });
});
