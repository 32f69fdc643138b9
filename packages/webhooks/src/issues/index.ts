// Issue trackers' create-issue requests and responses, as pure functions: GitHub Issues
// (POST {api}/repos/{owner}/{repo}/issues) and Jira Cloud (POST {site}/rest/api/3/issue). The worker sends the
// request through its one transport (URL check, pinning, pooling) and reads the created issue's key and URL back.
// Every created issue carries its export's marker (a hidden comment in a GitHub body, a label on Jira), so that an
// attempt whose previous outcome is unknown finds the issue (list of recent GitHub issues, Jira JQL search) and
// adopts it instead of creating a second one.

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
  method: 'GET' | 'POST';
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

/** The export's marker in a GitHub issue body: an HTML comment, which GitHub does not render. */
export function githubExportMarker(exportId: string): string {
  return `<!-- svc-export:${exportId} -->`;
}

/** The export's marker on a Jira issue: a label (labels hold no spaces; JQL finds them exactly). */
export function jiraExportLabel(exportId: string): string {
  return `svc-export-${exportId}`;
}

/** GitHub Flavored Markdown; the export's marker last, when the issue is created for an export. */
export function githubIssueBody(finding: IssueFinding, exportId?: string): string {
  const facts = factLines(finding).map(([label, value]) => (label === 'Location' ? `**${label}:** \`${value.replace(/`/g, "'")}\`` : `**${label}:** ${value}`));
  return [
    ...facts,
    '',
    ...(finding.description ? [finding.description, ''] : []),
    `[Open the finding in the Security Assessment Service](${finding.link})`,
    ...(exportId ? ['', githubExportMarker(exportId)] : []),
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

function githubIssuesUrl(target: IssueTarget): string {
  const [owner, repo] = (target.repository ?? '').split('/');
  return `${trimSlash(target.baseUrl)}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}/issues`;
}

function githubHeaders(credentials: IssueCredentials): Record<string, string> {
  return { ...JSON_HEADERS, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', authorization: `Bearer ${credentials.token ?? ''}` };
}

/** A GET sends no body, so no content type. */
function githubGetHeaders(credentials: IssueCredentials): Record<string, string> {
  const { 'content-type': _, ...headers } = githubHeaders(credentials);
  return headers;
}

function jiraHeaders(credentials: IssueCredentials): Record<string, string> {
  const basic = Buffer.from(`${credentials.email ?? ''}:${credentials.api_token ?? ''}`).toString('base64');
  return { ...JSON_HEADERS, authorization: `Basic ${basic}` };
}

function unknownTracker(target: IssueTarget): never {
  throw new TypeError(`Unknown issue tracker: ${String((target as { kind: unknown }).kind)}`);
}

/** The create request; with an export id, the issue carries that export's marker. */
export function issueCreateRequest(target: IssueTarget, credentials: IssueCredentials, finding: IssueFinding, exportId?: string): IssueRequest {
  if (target.kind === 'github') {
    return {
      method: 'POST',
      url: githubIssuesUrl(target),
      headers: githubHeaders(credentials),
      body: Buffer.from(JSON.stringify({ title: issueTitle(finding), body: githubIssueBody(finding, exportId) })),
    };
  }
  if (target.kind === 'jira') {
    const fields = {
      project: { key: target.projectKey },
      issuetype: { name: target.issueType },
      summary: issueTitle(finding),
      description: jiraDescription(finding),
      labels: ['security', ...(exportId ? [jiraExportLabel(exportId)] : [])],
    };
    return {
      method: 'POST',
      url: `${trimSlash(target.baseUrl)}/rest/api/3/issue`,
      headers: jiraHeaders(credentials),
      body: Buffer.from(JSON.stringify({ fields })),
    };
  }
  return unknownTracker(target);
}

/** The created issue from a 201 response body; throws when the body is not the tracker's shape. */
export function parseCreatedIssue(target: IssueTarget, body: Buffer): CreatedIssue {
  return readIssue(target, JSON.parse(body.toString('utf8')));
}

function isWebAddress(url: string): boolean {
  try {
    return ['https:', 'http:'].includes(new URL(url).protocol);
  } catch {
    return false;
  }
}

function readIssue(target: IssueTarget, parsed: unknown): CreatedIssue {
  const issue = (parsed ?? {}) as Record<string, unknown>;
  if (target.kind === 'github') {
    if (typeof issue.number !== 'number' || typeof issue.html_url !== 'string') throw new Error('GitHub answered without number and html_url');
    // The URL is shown to users as the issue's link: a web address, never javascript: or data:.
    if (!isWebAddress(issue.html_url)) throw new Error('GitHub answered an html_url that is not an http(s) address');
    return { key: `${target.repository}#${issue.number}`, url: issue.html_url };
  }
  if (typeof issue.key !== 'string') throw new Error('Jira answered without an issue key');
  return { key: issue.key, url: `${trimSlash(target.baseUrl)}/browse/${encodeURIComponent(issue.key)}` };
}

// Looking for an export's issue. GitHub: the repository's issues listed newest first, filtered on the server to
// those updated since the first create request (less a margin for clocks that disagree), each body scanned for the
// marker. The list is read from the database GitHub writes the issue to, so an issue created a moment ago is in it;
// the search API (GET /search/issues) is not used because its index lags behind by seconds to minutes, exactly the
// window in which a retry follows an unanswered request. Only when the list holds more issues since then than
// GITHUB_LOOKUP_MAX_PAGES pages (an export started over long after its first request, in a busy repository) does
// the search API look further back, where its lag no longer matters. Jira: a JQL search on the marker label (Jira
// Cloud's only way to find issues; its index usually follows within a second or two).

/** Issues per page of the GitHub list; their bodies can be long (up to 65,536 characters each). */
export const GITHUB_LOOKUP_PAGE_SIZE = 30;
/** GitHub pages read at most: an export's issue is among the issues created since its first request. */
export const GITHUB_LOOKUP_MAX_PAGES = 10;
/** Tracker and service clocks may disagree by this much. */
export const LOOKUP_CLOCK_MARGIN_MS = 15 * 60_000;

export interface IssueLookupQuery {
  exportId: string;
  /** When the first create request of the export may have been sent. */
  since: Date;
  /** 1-based page (GitHub). */
  page: number;
}

/** found: the oldest marked issue of this page; nextPage: whether a later page may still hold an older one. */
export type IssueLookupPage = { found: CreatedIssue | null; nextPage: boolean };

export function issueLookupRequest(target: IssueTarget, credentials: IssueCredentials, query: IssueLookupQuery): IssueRequest {
  if (target.kind === 'github') {
    const from = new Date(query.since.getTime() - LOOKUP_CLOCK_MARGIN_MS).toISOString();
    const params = new URLSearchParams({ state: 'all', sort: 'created', direction: 'desc', since: from, per_page: String(GITHUB_LOOKUP_PAGE_SIZE), page: String(query.page) });
    return { method: 'GET', url: `${githubIssuesUrl(target)}?${params}`, headers: githubGetHeaders(credentials), body: Buffer.alloc(0) };
  }
  if (target.kind === 'jira') {
    const jql = `project = "${target.projectKey}" AND labels = "${jiraExportLabel(query.exportId)}" AND created >= "${jqlDate(query.since)}" ORDER BY created ASC`;
    return {
      method: 'POST',
      url: `${trimSlash(target.baseUrl)}/rest/api/3/search/jql`,
      headers: jiraHeaders(credentials),
      body: Buffer.from(JSON.stringify({ jql, fields: ['labels', 'created'], maxResults: 10 })),
    };
  }
  return unknownTracker(target);
}

/** JQL reads dates in the account's time zone (UTC-12 to UTC+14): 14 h more margin, in UTC, is early enough in all. */
function jqlDate(since: Date): string {
  const from = new Date(since.getTime() - LOOKUP_CLOCK_MARGIN_MS - 14 * 3600_000).toISOString();
  return `${from.slice(0, 10)} ${from.slice(11, 16)}`;
}

/** GitHub's search for the marker in the repository's issue bodies (older issues than the list reached). */
export function githubMarkerSearchRequest(target: IssueTarget, credentials: IssueCredentials, exportId: string, since: Date): IssueRequest {
  // Created since the first request: older issues edited to carry the marker must not fill the results.
  const from = new Date(since.getTime() - LOOKUP_CLOCK_MARGIN_MS).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const q = `"svc-export:${exportId}" repo:${target.repository ?? ''} in:body is:issue created:>=${from}`;
  const params = new URLSearchParams({ q, sort: 'created', order: 'asc', per_page: '10' });
  return { method: 'GET', url: `${trimSlash(target.baseUrl)}/search/issues?${params}`, headers: githubGetHeaders(credentials), body: Buffer.alloc(0) };
}

/** The oldest marked issue the search found; `complete` is false when GitHub says its results are incomplete. */
export function readGithubMarkerSearch(target: IssueTarget, exportId: string, body: Buffer, since: Date): { found: CreatedIssue | null; complete: boolean } {
  const parsed = JSON.parse(body.toString('utf8')) as { items?: unknown; incomplete_results?: unknown };
  if (!Array.isArray(parsed.items)) throw new Error('GitHub answered the search without items');
  const found = oldestMarked(parsed.items, githubExportMarker(exportId), since);
  return { found: found ? readIssue(target, found) : null, complete: parsed.incomplete_results !== true };
}

/**
 * Only issues created since the first request (less the clock margin) count: an older issue whose body someone
 * edited to carry the marker (read off the export's own issue) would otherwise be the oldest, and adopted.
 */
function oldestMarked(issues: unknown[], marker: string, since: Date): Record<string, unknown> | null {
  const earliest = since.getTime() - LOOKUP_CLOCK_MARGIN_MS;
  const marked = (issues as Array<Record<string, unknown>>).filter(
    (issue) =>
      issue &&
      !issue.pull_request &&
      typeof issue.body === 'string' &&
      issue.body.includes(marker) &&
      typeof issue.number === 'number' &&
      typeof issue.created_at === 'string' &&
      Date.parse(issue.created_at) >= earliest,
  );
  return marked.length === 0 ? null : marked.reduce((a, b) => ((a.number as number) <= (b.number as number) ? a : b));
}

/** The export's issue in a page of the lookup's answer (the oldest when there are several), or whether to read on. */
export function readIssueLookup(target: IssueTarget, query: IssueLookupQuery, body: Buffer): IssueLookupPage {
  const parsed = JSON.parse(body.toString('utf8')) as unknown;
  if (target.kind === 'github') {
    if (!Array.isArray(parsed)) throw new Error('GitHub answered the issue list without an array');
    const oldest = oldestMarked(parsed, githubExportMarker(query.exportId), query.since);
    const found = oldest ? readIssue(target, oldest) : null;
    const earliest = query.since.getTime() - LOOKUP_CLOCK_MARGIN_MS;
    const last = parsed[parsed.length - 1] as Record<string, unknown> | undefined;
    const lastCreated = last && typeof last.created_at === 'string' ? Date.parse(last.created_at) : Number.NaN;
    // Newest first: once a page ends before the first request (or the list ends), no later page can hold the issue.
    // Read on even after a hit: a copy of the marker on a newer issue must not hide the export's own, older one.
    return { found, nextPage: parsed.length >= GITHUB_LOOKUP_PAGE_SIZE && !(lastCreated < earliest) };
  }
  const issues = (parsed as { issues?: unknown }).issues;
  if (!Array.isArray(issues)) throw new Error('Jira answered the search without issues');
  const label = jiraExportLabel(query.exportId);
  const earliest = query.since.getTime() - LOOKUP_CLOCK_MARGIN_MS;
  // As on GitHub, only an issue created since the first request: not an older one someone labelled since.
  const marked = issues.find(
    (issue: { fields?: { labels?: unknown; created?: unknown } }) =>
      Array.isArray(issue?.fields?.labels) &&
      issue.fields.labels.includes(label) &&
      typeof issue.fields.created === 'string' &&
      Date.parse(issue.fields.created) >= earliest,
  );
  return { found: marked ? readIssue(target, marked) : null, nextPage: false };
}
