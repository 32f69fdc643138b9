import { sentinelUrlProblem } from './sentinel-url';

const DCR = `dcr-${'0123456789abcdef'.repeat(2)}`;
const GOOD = `https://my-dce-abcd.westeurope-1.ingest.monitor.azure.com/dataCollectionRules/${DCR}/streams/Custom-SecurityAssessment?api-version=2023-01-01`;

describe('sentinelUrlProblem', () => {
  it('accepts a Logs Ingestion URL', () => {
    expect(sentinelUrlProblem(GOOD)).toBeNull();
  });

  it.each([
    [GOOD.replace('https:', 'http:'), /https scheme/],
    [GOOD.replace(`/dataCollectionRules/${DCR}`, ''), /\/dataCollectionRules\/<dcr-immutable-id>/],
    [GOOD.replace(DCR, 'my-rule'), /dcr-<32 hex digits>/],
    [GOOD.replace('/streams/Custom-SecurityAssessment', ''), /\/streams\/<stream>/],
    [GOOD.replace('Custom-SecurityAssessment', 'SecurityAssessment'), /starting with Custom-/],
    [GOOD.replace('?api-version=2023-01-01', ''), /api-version/],
    ['not a url', /not a URL/],
  ])('names what %s lacks', (url, problem) => {
    expect(sentinelUrlProblem(url)).toMatch(problem);
  });

  it('names every missing part at once', () => {
    expect(sentinelUrlProblem('https://example.com/')).toMatch(/dataCollectionRules.*streams.*api-version/);
  });
});
