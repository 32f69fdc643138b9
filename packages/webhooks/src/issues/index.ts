// Issue trackers' create-issue requests and responses, as pure functions: GitHub Issues
// (POST {api}/repos/{owner}/{repo}/issues) and Jira Cloud (POST {site}/rest/api/3/issue). The worker sends the
// request through its one transport (URL check, pinning, pooling) and reads the created issue's key and URL back.

export const ISSUE_TRACKER_KINDS = ['github', 'jira'] as const;
export type IssueTrackerKind = (typeof ISSUE_TRACKER_KINDS)[number];
export const GITHUB_API_URL = 'https://api.github.com';
/** Jira's summary field holds at most 255 characters; GitHub titles are clipped alike. */
export const ISSUE_TITLE_MAX = 255;

export function isIssueTrackerKind(value: unknown): value is IssueTrackerKind {
  return typeof value === 'string' && (ISSUE_TRACKER_KINDS as readonly string[]).includes(value);
}

export interface IssueTarget {
  kind: IssueTrackerKind;
  /** GitHub REST API base, or the Jira site URL. */
  baseUrl: string;
  /** GitHub: owner/repo. */
  repository?: string | null;
  projectKey?: string | null;
  issueType?: string | null;
}

export interface IssueCredentials {
  /** GitHub token. */
  token?: string;
  /** Jira: the account's e-mail and API token. */
  email?: string;
  api_token?: string;
}

export interface IssueFinding {
  id: string;
  title: string;
  severity: string;
  status: string;
  location: string | null;
  description: string | null;
  /** The finding in the dashboard. */
  link: string;
}

export interface IssueRequest {
  url: string;
  headers: Record<string, string>;
  body: Buffer;
}

export interface CreatedIssue {
  /** owner/repo#number (GitHub) or the Jira issue key. */
  key: string;
  url: string;
}

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
const trimSlash = (url: string) => url.replace(/\/+$/, '');

export function issueTitle(finding: IssueFinding): string {
  return clip(`[${finding.severity}] ${finding.title.replace(/[\r\n]+/g, ' ')}`, ISSUE_TITLE_MAX);
}

/** The facts of the issue body, one per line. */
function factLines(finding: IssueFinding): Array<[string, string]> {
  return [
    ['Severity', finding.severity],
    ['Status', finding.status.replace(/_/g, ' ')],
    ...(finding.location ? [['Location', finding.location] as [string, string]] : []),
    ['Finding', finding.id],
  ];
}

/** GitHub Flavored Markdown. */
export function githubIssueBody(finding: IssueFinding): string {
  const facts = factLines(finding).map(([label, value]) => (label === 'Location' ? `**${label}:** \`${value.replace(/`/g, "'")}\`` : `**${label}:** ${value}`));
  return [
    ...facts,
    '',
    ...(finding.description ? [finding.description, ''] : []),
    `[Open the finding in the Security Assessment Service](${finding.link})`,
  ].join('\n');
}

/** Atlassian Document Format (Jira Cloud REST API v3 takes nothing else for rich text fields). */
export function jiraDescription(finding: IssueFinding) {
  const text = (value: string, marks?: unknown[]) => ({ type: 'text', text: value, ...(marks && { marks }) });
  const paragraph = (...content: unknown[]) => ({ type: 'paragraph', content });
  return {
    type: 'doc',
    version: 1,
    content: [
      ...factLines(finding).map(([label, value]) => paragraph(text(`${label}: `, [{ type: 'strong' }]), text(value, label === 'Location' ? [{ type: 'code' }] : undefined))),
      ...(finding.description ? [paragraph(text(finding.description))] : []),
      paragraph(text('Open the finding in the Security Assessment Service', [{ type: 'link', attrs: { href: finding.link } }])),
    ],
  };
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json', 'user-agent': 'security-assessment-service' };

export function issueCreateRequest(target: IssueTarget, credentials: IssueCredentials, finding: IssueFinding): IssueRequest {
  if (target.kind === 'github') {
    const [owner, repo] = (target.repository ?? '').split('/');
    return {
      url: `${trimSlash(target.baseUrl)}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}/issues`,
      headers: { ...JSON_HEADERS, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', authorization: `Bearer ${credentials.token ?? ''}` },
      body: Buffer.from(JSON.stringify({ title: issueTitle(finding), body: githubIssueBody(finding) })),
    };
  }
  if (target.kind === 'jira') {
    const basic = Buffer.from(`${credentials.email ?? ''}:${credentials.api_token ?? ''}`).toString('base64');
    const fields = {
      project: { key: target.projectKey },
      issuetype: { name: target.issueType },
      summary: issueTitle(finding),
      description: jiraDescription(finding),
      labels: ['security'],
    };
    return {
      url: `${trimSlash(target.baseUrl)}/rest/api/3/issue`,
      headers: { ...JSON_HEADERS, authorization: `Basic ${basic}` },
      body: Buffer.from(JSON.stringify({ fields })),
    };
  }
  throw new TypeError(`Unknown issue tracker: ${String((target as { kind: unknown }).kind)}`);
}

/** The created issue from a 201 response body; throws when the body is not the tracker's shape. */
export function parseCreatedIssue(target: IssueTarget, body: Buffer): CreatedIssue {
  const parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  if (target.kind === 'github') {
    if (typeof parsed.number !== 'number' || typeof parsed.html_url !== 'string') throw new Error('GitHub answered without number and html_url');
    return { key: `${target.repository}#${parsed.number}`, url: parsed.html_url };
  }
  if (typeof parsed.key !== 'string') throw new Error('Jira answered without an issue key');
  return { key: parsed.key, url: `${trimSlash(target.baseUrl)}/browse/${encodeURIComponent(parsed.key)}` };
}
