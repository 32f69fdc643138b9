// Splunk HEC explains a refusal in a JSON body, e.g. {"text":"Data channel is missing","code":10}. The attempt's
// recorded error keeps that body as it is, so whoever reads the attempt log sees Splunk's own words.
import type { HttpResult } from './post';

export function hecErrorOf(payloadFormat: string, result: HttpResult): string | null {
  const status = result.response?.status;
  if (payloadFormat !== 'splunk_hec' || status === undefined || (status >= 200 && status < 300)) return null;
  const text = result.body.toString('utf8').trim();
  try {
    const json = JSON.parse(text) as unknown;
    const isHecError = json !== null && typeof json === 'object' && ('text' in json || 'code' in json);
    return isHecError ? text : null;
  } catch {
    return null;
  }
}
