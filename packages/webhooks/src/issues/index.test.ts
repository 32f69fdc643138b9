import { githubIssueBody, issueCreateRequest, issueTitle, isIssueTrackerKind, parseCreatedIssue, type IssueFinding } from './index';

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
});
