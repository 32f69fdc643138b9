// The Azure Monitor Logs Ingestion URL shape a microsoft_sentinel subscription must have:
// https://<endpoint>/dataCollectionRules/<dcr-immutable-id>/streams/<stream>?api-version=<version>

const DCR_IMMUTABLE_ID = /^dcr-[0-9a-f]{32}$/i;
const STREAM_NAME = /^Custom-[A-Za-z0-9_-]+$/;

/** What is wrong with a Sentinel URL, in words, or null when it has the Logs Ingestion shape. */
export function sentinelUrlProblem(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'it is not a URL';
  }
  const segments = parsed.pathname.split('/').filter(Boolean);
  const problems: string[] = [];
  if (parsed.protocol !== 'https:') problems.push('the https scheme');
  const dcrAt = segments.indexOf('dataCollectionRules');
  if (dcrAt === -1 || segments[dcrAt + 1] === undefined) {
    problems.push('the path segment /dataCollectionRules/<dcr-immutable-id>');
  } else if (!DCR_IMMUTABLE_ID.test(segments[dcrAt + 1])) {
    problems.push('a DCR immutable id of the form dcr-<32 hex digits> after /dataCollectionRules/');
  }
  const streamAt = segments.indexOf('streams');
  if (streamAt === -1 || segments[streamAt + 1] === undefined) {
    problems.push('the path segment /streams/<stream> (e.g. Custom-SecurityAssessment)');
  } else if (!STREAM_NAME.test(decodeURIComponent(segments[streamAt + 1]))) {
    problems.push('a stream name starting with Custom- after /streams/');
  }
  if (!parsed.searchParams.get('api-version')) problems.push('the api-version query parameter (e.g. ?api-version=2023-01-01)');
  return problems.length === 0 ? null : `it lacks ${problems.join('; ')}`;
}
