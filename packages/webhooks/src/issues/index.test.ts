import {
  GITHUB_LOOKUP_PAGE_SIZE,
  LOOKUP_CLOCK_MARGIN_MS,
  githubExportMarker,
  githubIssueBody,
  githubMarkerSearchRequest,
  issueCreateRequest,
  issueLookupRequest,
  issueTitle,
  isIssueTrackerKind,
  jiraExportLabel,
  parseCreatedIssue,
  readGithubMarkerSearch,
  readIssueLookup,
  type IssueFinding,
} from './index';

const finding: IssueFinding = {
  id: 'fnd_1',
  title: 'SQL injection\nin login',
  severity: 'high',
  status: 'accepted_risk',
  location: 'src/`login`.ts:42',
  description: 'User input reaches the query.',
  link: 'https://security.example.com/assessments/asm_1#finding-fnd_1',
};
const github = { kind: 'github' as const, baseUrl: 'https://ghe.example.com/api/v3/', repository: 'acme/web' };
const jira = { kind: 'jira' as const, baseUrl: 'https://acme.atlassian.net', projectKey: 'SEC', issueType: 'Bug' };

describe('issue titles and bodies', () => {
  it('puts the severity first, on one line, within 255 characters', () => {
    expect(issueTitle(finding)).toBe('[high] SQL injection in login');
    expect(issueTitle({ ...finding, title: 'x'.repeat(400) })).toHaveLength(255);
  });

  it('writes the GitHub body in Markdown with the facts, the description and the link', () => {
    expect(githubIssueBody(finding)).toBe(
      [
        '**Severity:** high',
        '**Status:** accepted risk',
        "**Location:** `src/'login'.ts:42`",
        '**Finding:** fnd_1',
        '',
        'User input reaches the query.',
        '',
        '[Open the finding in the Security Assessment Service](https://security.example.com/assessments/asm_1#finding-fnd_1)',
      ].join('\n'),
    );
    expect(githubIssueBody({ ...finding, location: null, description: null })).not.toContain('Location');
  });
});

describe('issueCreateRequest', () => {
  it('GitHub: POST {api}/repos/{owner}/{repo}/issues with a bearer token and the REST API version', () => {
    const request = issueCreateRequest(github, { token: 'ghp_secret' }, finding);
    expect(request.url).toBe('https://ghe.example.com/api/v3/repos/acme/web/issues');
    expect(request.headers).toMatchObject({ authorization: 'Bearer ghp_secret', accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' });
    expect(JSON.parse(request.body.toString())).toEqual({ title: '[high] SQL injection in login', body: githubIssueBody(finding) });
  });

  it('Jira: POST {site}/rest/api/3/issue with basic auth and an ADF description', () => {
    const request = issueCreateRequest(jira, { email: 'bot@acme.com', api_token: 'jira-secret' }, finding);
    expect(request.url).toBe('https://acme.atlassian.net/rest/api/3/issue');
    expect(request.headers.authorization).toBe(`Basic ${Buffer.from('bot@acme.com:jira-secret').toString('base64')}`);
    const { fields } = JSON.parse(request.body.toString());
    expect(fields).toMatchObject({ project: { key: 'SEC' }, issuetype: { name: 'Bug' }, summary: '[high] SQL injection in login', labels: ['security'] });
    expect(fields.description).toMatchObject({ type: 'doc', version: 1 });
    expect(fields.description.content[0].content).toEqual([
      { type: 'text', text: 'Severity: ', marks: [{ type: 'strong' }] },
      { type: 'text', text: 'high' },
    ]);
    expect(fields.description.content.at(-1).content[0].marks[0]).toEqual({ type: 'link', attrs: { href: finding.link } });
  });

  it('refuses an unknown tracker', () => {
    expect(() => issueCreateRequest({ kind: 'gitlab' } as never, {}, finding)).toThrow(TypeError);
    expect(isIssueTrackerKind('github') && isIssueTrackerKind('jira') && !isIssueTrackerKind('gitlab')).toBe(true);
  });
});

describe('parseCreatedIssue', () => {
  it('reads GitHub number and html_url, and the Jira key with its browse URL', () => {
    expect(parseCreatedIssue(github, Buffer.from(JSON.stringify({ number: 7, html_url: 'https://ghe.example.com/acme/web/issues/7' })))).toEqual({
      key: 'acme/web#7',
      url: 'https://ghe.example.com/acme/web/issues/7',
    });
    expect(parseCreatedIssue(jira, Buffer.from('{"id":"10001","key":"SEC-12","self":"https://acme.atlassian.net/rest/api/3/issue/10001"}'))).toEqual({
      key: 'SEC-12',
      url: 'https://acme.atlassian.net/browse/SEC-12',
    });
  });

  it('refuses a body of another shape', () => {
    expect(() => parseCreatedIssue(github, Buffer.from('{"id":1}'))).toThrow(/number and html_url/);
    expect(() => parseCreatedIssue(jira, Buffer.from('{}'))).toThrow(/issue key/);
    expect(() => parseCreatedIssue(jira, Buffer.from('<html>'))).toThrow(SyntaxError);
  });

  it('refuses an html_url that is not a web address (it is shown to users as the issue\'s link)', () => {
    for (const html_url of ['javascript:alert(document.cookie)', 'data:text/html,<script>alert(1)</script>', '//evil.example/x', 'not a url']) {
      expect(() => parseCreatedIssue(github, Buffer.from(JSON.stringify({ number: 7, html_url })))).toThrow(/html_url/);
    }
  });
});

describe('export markers', () => {
  const exportId = 'iexj_01abc';

  it('GitHub: a hidden HTML comment after the link; Jira: a label beside security', () => {
    const gh = JSON.parse(issueCreateRequest(github, { token: 't' }, finding, exportId).body.toString());
    expect(gh.body).toBe(`${githubIssueBody(finding)}\n\n<!-- svc-export:iexj_01abc -->`);
    expect(githubExportMarker(exportId)).toBe('<!-- svc-export:iexj_01abc -->');
    const { fields } = JSON.parse(issueCreateRequest(jira, { email: 'a@b.co', api_token: 't' }, finding, exportId).body.toString());
    expect(fields.labels).toEqual(['security', 'svc-export-iexj_01abc']);
    expect(jiraExportLabel(exportId)).not.toMatch(/\s/);
  });
});

describe('looking for an export\'s issue', () => {
  const since = new Date('2026-11-26T10:00:00.000Z');
  const query = { exportId: 'iexj_01abc', since, page: 2 };
  const issue = (number: number, body: string | null, createdAt = '2026-11-26T10:00:01Z', extra: Record<string, unknown> = {}) => ({
    number,
    html_url: `https://ghe.example.com/acme/web/issues/${number}`,
    body,
    created_at: createdAt,
    ...extra,
  });

  it('GitHub: lists the repository\'s issues of every state, newest first, updated since the first request less a margin', () => {
    const request = issueLookupRequest(github, { token: 'ghp_secret' }, query);
    expect(request.method).toBe('GET');
    const url = new URL(request.url);
    expect(url.origin + url.pathname).toBe('https://ghe.example.com/api/v3/repos/acme/web/issues');
    expect(Object.fromEntries(url.searchParams)).toEqual({
      state: 'all',
      sort: 'created',
      direction: 'desc',
      since: new Date(since.getTime() - LOOKUP_CLOCK_MARGIN_MS).toISOString(),
      per_page: String(GITHUB_LOOKUP_PAGE_SIZE),
      page: '2',
    });
    expect(request.headers).toMatchObject({ authorization: 'Bearer ghp_secret', accept: 'application/vnd.github+json' });
    expect(request.body).toHaveLength(0);
  });

  it('GitHub: adopts the oldest issue whose body carries the marker, never a pull request or another export\'s', () => {
    const marker = githubExportMarker('iexj_01abc');
    const page = [
      issue(9, `x\n${marker}`),
      issue(8, `x\n${githubExportMarker('iexj_01abcd')}`), // another export whose id starts alike
      issue(7, `x\n${marker}`, undefined, { pull_request: { url: 'u' } }),
      issue(5, `x\n${marker}`),
      issue(4, null),
    ];
    expect(readIssueLookup(github, query, Buffer.from(JSON.stringify(page)))).toEqual({
      found: { key: 'acme/web#5', url: 'https://ghe.example.com/acme/web/issues/5' },
      nextPage: false,
    });
  });

  it('GitHub: never adopts an issue created before the first request, even one edited since to carry the marker', () => {
    // Anyone who may edit an older issue of the repository (its author, in a public one) can paste the marker
    // there once they have read it in the export's issue: oldest by number, it would win.
    const marker = githubExportMarker('iexj_01abc');
    const page = [issue(12, `x\n${marker}`), issue(11, 'no marker'), issue(3, `edited\n${marker}`, '2025-01-01T00:00:00Z')];
    expect(readIssueLookup(github, query, Buffer.from(JSON.stringify(page)))).toEqual({
      found: { key: 'acme/web#12', url: 'https://ghe.example.com/acme/web/issues/12' },
      nextPage: false,
    });
    expect(readIssueLookup(github, query, Buffer.from(JSON.stringify([issue(3, marker, '2025-01-01T00:00:00Z')])))).toEqual({ found: null, nextPage: false });
    const answer = Buffer.from(JSON.stringify({ incomplete_results: false, items: [issue(3, marker, '2025-01-01T00:00:00Z'), issue(12, marker)] }));
    expect(readGithubMarkerSearch(github, 'iexj_01abc', answer, since)).toEqual({ found: { key: 'acme/web#12', url: 'https://ghe.example.com/acme/web/issues/12' }, complete: true });
    expect(() => readIssueLookup(github, query, Buffer.from(JSON.stringify([issue(12, marker, undefined, { html_url: 'javascript:alert(1)' })])))).toThrow(/html_url/);
  });

  it('GitHub: reads on only while a full page still reaches back to the first request', () => {
    const full = (createdAt: string) => Buffer.from(JSON.stringify(Array.from({ length: GITHUB_LOOKUP_PAGE_SIZE }, (_, i) => issue(100 - i, 'no marker', createdAt))));
    expect(readIssueLookup(github, query, full('2026-11-26T10:00:05Z'))).toEqual({ found: null, nextPage: true });
    // A hit on a full page still reads on: the next page's issues are older, and a marked one there is the export's.
    const marked = Array.from({ length: GITHUB_LOOKUP_PAGE_SIZE }, (_, i) => issue(100 - i, i === 3 ? githubExportMarker('iexj_01abc') : 'no'));
    expect(readIssueLookup(github, query, Buffer.from(JSON.stringify(marked)))).toEqual({ found: { key: 'acme/web#97', url: 'https://ghe.example.com/acme/web/issues/97' }, nextPage: true });
    expect(readIssueLookup(github, query, full('2026-11-26T09:00:00Z'))).toEqual({ found: null, nextPage: false });
    expect(readIssueLookup(github, query, Buffer.from(JSON.stringify([issue(1, 'no')])))).toEqual({ found: null, nextPage: false });
    expect(() => readIssueLookup(github, query, Buffer.from('{"message":"x"}'))).toThrow(/array/);
    expect(() => readIssueLookup(github, query, Buffer.from('[{"number":'))).toThrow(SyntaxError);
  });

  it('GitHub, further back than the list reaches: the search API on the marker phrase in the repository\'s bodies', () => {
    const request = githubMarkerSearchRequest(github, { token: 'ghp_secret' }, 'iexj_01abc', since);
    const url = new URL(request.url);
    expect(request.method).toBe('GET');
    expect(url.origin + url.pathname).toBe('https://ghe.example.com/api/v3/search/issues');
    // Only issues created since the first request (less the margin): older ones edited to carry the marker would
    // otherwise fill the 10 results, oldest first, and hide the export's own.
    expect(url.searchParams.get('q')).toBe('"svc-export:iexj_01abc" repo:acme/web in:body is:issue created:>=2026-11-26T09:45:00Z');
    const marker = githubExportMarker('iexj_01abc');
    const answer = (items: unknown[], incomplete = false) => Buffer.from(JSON.stringify({ total_count: items.length, incomplete_results: incomplete, items }));
    expect(readGithubMarkerSearch(github, 'iexj_01abc', answer([issue(12, `x ${marker}`), issue(3, `y ${marker}`), issue(2, 'mentions svc-export:iexj_01abc in prose')]), since)).toEqual({
      found: { key: 'acme/web#3', url: 'https://ghe.example.com/acme/web/issues/3' },
      complete: true,
    });
    expect(readGithubMarkerSearch(github, 'iexj_01abc', answer([], true), since)).toEqual({ found: null, complete: false });
    expect(() => readGithubMarkerSearch(github, 'iexj_01abc', Buffer.from('{"message":"x"}'), since)).toThrow(/without items/);
  });

  it('Jira: a JQL search on the marker label in the project, read back by key', () => {
    const request = issueLookupRequest(jira, { email: 'bot@acme.com', api_token: 'jira-secret' }, query);
    expect(request).toMatchObject({ method: 'POST', url: 'https://acme.atlassian.net/rest/api/3/search/jql' });
    expect(JSON.parse(request.body.toString())).toEqual({
      // JQL dates are in the account's time zone: 14 h more margin covers every zone.
      jql: 'project = "SEC" AND labels = "svc-export-iexj_01abc" AND created >= "2026-11-25 19:45" ORDER BY created ASC',
      fields: ['labels', 'created'],
      maxResults: 10,
    });
    const answer = { issues: [{ id: '10002', key: 'SEC-13', fields: { labels: ['security', 'svc-export-iexj_01abc'], created: '2026-11-26T10:00:01.000+0000' } }], isLast: true };
    expect(readIssueLookup(jira, query, Buffer.from(JSON.stringify(answer)))).toEqual({ found: { key: 'SEC-13', url: 'https://acme.atlassian.net/browse/SEC-13' }, nextPage: false });
    expect(readIssueLookup(jira, query, Buffer.from('{"issues":[],"isLast":true}'))).toEqual({ found: null, nextPage: false });
    // An older issue someone labelled since is never adopted: only issues created since the first request count.
    const relabelled = {
      issues: [
        { key: 'SEC-2', fields: { labels: ['svc-export-iexj_01abc'], created: '2026-11-26T01:00:00.000+0000' } },
        { key: 'SEC-14', fields: { labels: ['svc-export-iexj_01abc'], created: '2026-11-26T10:00:02.000+0000' } },
      ],
    };
    expect(readIssueLookup(jira, query, Buffer.from(JSON.stringify(relabelled)))).toEqual({ found: { key: 'SEC-14', url: 'https://acme.atlassian.net/browse/SEC-14' }, nextPage: false });
    const unlabelled = { issues: [{ key: 'SEC-1', fields: { labels: ['svc-export-iexj_01abcd'] } }] };
    expect(readIssueLookup(jira, query, Buffer.from(JSON.stringify(unlabelled)))).toEqual({ found: null, nextPage: false });
    expect(() => readIssueLookup(jira, query, Buffer.from('{"errorMessages":["x"]}'))).toThrow(/without issues/);
  });
});
