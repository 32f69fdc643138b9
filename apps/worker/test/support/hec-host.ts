// A fake Splunk HEC host on a test receiver: channels made by the first event POST on them, ackIds counted per
// channel from 0, and an indexed ackId reported true once (then false), as Splunk does.
import type { ReceivedRequest, Receiver } from './receiver';

export const HEC_EVENT_PATH = '/services/collector/event';
export const HEC_ACK_PATH = '/services/collector/ack';
export const HEC_TOKEN = 'Splunk 11111111-2222-3333-4444-555555555555';

export class HecHost {
  private readonly channels = new Map<string, number>();
  private readonly reported = new Set<string>();

  /** `indexed`: whether the host has indexed that event; `ackDelayMs`: how long its ack answers take to arrive. */
  constructor(
    private readonly indexed: (channel: string, ackId: number) => boolean,
    private readonly ackDelayMs = 0,
  ) {}

  serve(receiver: Receiver): void {
    receiver.script(HEC_EVENT_PATH, (req) => this.event(req));
    receiver.script(HEC_ACK_PATH, (req) => this.ack(req));
  }

  private event(request: ReceivedRequest) {
    const channel = request.headers['x-splunk-request-channel'] as string | undefined;
    if (!channel) return json(400, { text: 'Data channel is missing', code: 10 });
    const ackId = this.channels.get(channel) ?? 0;
    this.channels.set(channel, ackId + 1);
    return json(200, { text: 'Success', code: 0, ackId });
  }

  private ack(request: ReceivedRequest) {
    const channel = request.headers['x-splunk-request-channel'] as string | undefined;
    if (!channel || request.headers.authorization !== HEC_TOKEN) return json(401, { text: 'Invalid token', code: 4 });
    const issued = this.channels.get(channel);
    if (issued === undefined) return json(400, { text: 'Invalid data channel', code: 11 });
    const { acks } = JSON.parse(request.body.toString('utf8')) as { acks: number[] };
    const answer: Record<string, boolean> = {};
    for (const id of acks) {
      const key = `${channel}/${id}`;
      const yes = id < issued && this.indexed(channel, id) && !this.reported.has(key);
      if (yes) this.reported.add(key);
      answer[String(id)] = yes;
    }
    return { ...json(200, { acks: answer }), delayMs: this.ackDelayMs };
  }
}

function json(status: number, body: unknown) {
  return { status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

export const onChannel = (channel: string) => (r: ReceivedRequest) => r.headers['x-splunk-request-channel'] === channel;
