// Fake issue trackers on the loopback HTTPS receiver that keep the issues they create and answer the lookups, in the
// real request and response shapes: GitHub's POST and GET {api}/repos/{owner}/{repo}/issues (list: state, since
// on updated_at, sort=created, direction, per_page, page) and Jira Cloud's POST /rest/api/3/issue and
// POST /rest/api/3/search/jql (JQL on project and label). A test decides how each create request is answered after
// the issue is (or is not) created: late, 502, an unreadable 2xx, held forever.
import type { Receiver, ReceivedRequest, Reply } from './receiver';

export interface TrackedIssue {
  key: string;
  url: string;
  title: string;
  /** GitHub: the body; Jira: the labels joined by spaces. */
  text: string;
}

export interface Behaviour {
  /** Whether the n-th create request creates the issue (default: every one). */
  creates?: (n: number) => boolean;
  /** The answer to the n-th create request, given the tracker's normal answer (default: that answer). */
  answer?: (n: number, normal: Reply) => Reply;
  /** The answer to the n-th lookup, given the normal one (default: that answer). */
  lookupAnswer?: (n: number, normal: Reply) => Reply;
}

export interface FakeTracker {
  kind: 'github' | 'jira';
  /** Issues others create (GitHub): a busy repository. */
  addIssues(count: number): void;
  /** Someone else's issue created at that time (GitHub), to edit later: its body and updated_at can be changed. */
  addIssue(body: string, createdAt: Date): { body: string; updated_at: string };
  /** The target's fields for POST /api/v1/issue-export-targets, credentials included. */
  targetFields: Record<string, unknown>;
  issues: TrackedIssue[];
  creates(): ReceivedRequest[];
  lookups(): ReceivedRequest[];
  /** Resolves once the tracker holds this many issues. */
  waitForIssues(count: number, timeoutMs?: number): Promise<TrackedIssue[]>;
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  body: JSON.stringify(body),
});
const unauthorized = (): Reply => json(401, { message: 'Bad credentials' });

function tracker(
  kind: FakeTracker['kind'],
  targetFields: Record<string, unknown>,
  requests: () => ReceivedRequest[],
  isCreate: (r: ReceivedRequest) => boolean,
  issues: TrackedIssue[],
  addIssues: (count: number) => void = () => {
    throw new Error('not supported');
  },
  addIssue: FakeTracker['addIssue'] = () => {
    throw new Error('not supported');
  },
): FakeTracker {
  return {
    kind,
    addIssues,
    addIssue,
    targetFields,
    issues,
    creates: () => requests().filter(isCreate),
    lookups: () => requests().filter((r) => !isCreate(r)),
    async waitForIssues(count, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (issues.length < count) {
        if (Date.now() > deadline) throw new Error(`The ${kind} tracker holds ${issues.length} of ${count} issues`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return issues;
    },
  };
}

/** GitHub timestamps: ISO 8601 in whole seconds. */
const githubTime = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

type GitHubIssue = Record<string, unknown> & { number: number; body: string; updated_at: string; state: string };
/** Each API base's repositories, for its search endpoint (GET {api}/search/issues, `repo:` qualifier). */
const githubSites = new WeakMap<Receiver, Map<string, Map<string, GitHubIssue[]>>>();

function githubSite(receiver: Receiver, apiBase: string): Map<string, GitHubIssue[]> {
  const sites = githubSites.get(receiver) ?? new Map<string, Map<string, GitHubIssue[]>>();
  githubSites.set(receiver, sites);
  let repos = sites.get(apiBase);
  if (!repos) {
    const site = new Map<string, GitHubIssue[]>();
    repos = site;
    sites.set(apiBase, site);
    // The search index: qualifiers repo:, in:body, is:issue, created:>= and one quoted phrase, as GitHub's q= syntax.
    receiver.script(`${apiBase}/search/issues`, (req) => {
      if (!req.headers.authorization?.startsWith('Bearer ')) return unauthorized();
      const q = new URLSearchParams(req.query).get('q') ?? '';
      const phrase = /"([^"]+)"/.exec(q)?.[1];
      const repo = /repo:(\S+)/.exec(q)?.[1];
      if (!phrase || !repo) return json(422, { message: 'Validation Failed', errors: [{ message: 'The search is longer than 256 characters.' }] });
      const createdFrom = /created:>=(\S+)/.exec(q)?.[1];
      const items = (site.get(repo) ?? [])
        .filter((i) => i.body.includes(phrase) && (!createdFrom || Date.parse(i.created_at as string) >= Date.parse(createdFrom)))
        .sort((a, b) => a.number - b.number);
      return json(200, { total_count: items.length, incomplete_results: false, items: items.map((i) => ({ ...i, score: 1 })) });
    });
  }
  return repos;
}

/** A GitHub (Enterprise) repository at {receiver}{apiBase}/repos/{repository}. */
export function fakeGitHub(receiver: Receiver, apiBase: string, repository: string, token: string, behaviour: Behaviour = {}): FakeTracker {
  const path = `${apiBase}/repos/${repository}/issues`;
  const stored: GitHubIssue[] = [];
  githubSite(receiver, apiBase).set(repository, stored);
  const issues: TrackedIssue[] = [];
  let createCount = 0;
  let lookupCount = 0;
  const store = (title: string, body: string): GitHubIssue => {
    const number = stored.length + 1;
    const now = githubTime(Date.now());
    const issue: GitHubIssue = {
      url: `${receiver.url(path)}/${number}`,
      html_url: `https://ghe.example.com/${repository}/issues/${number}`,
      id: 5000 + number,
      number,
      title,
      user: { login: 'svc-bot', type: 'User' },
      labels: [],
      state: 'open',
      body,
      created_at: now,
      updated_at: now,
      closed_at: null,
    };
    stored.push(issue);
    return issue;
  };
  receiver.script(path, (req) => {
    if (req.headers.authorization !== `Bearer ${token}`) return unauthorized();
    if (req.method === 'POST') {
      createCount += 1;
      const input = JSON.parse(req.body.toString()) as { title: string; body: string };
      let issue: Record<string, unknown> = { message: 'not created' };
      if (behaviour.creates?.(createCount) ?? true) {
        issue = store(input.title, input.body);
        issues.push({ key: `${repository}#${issue.number}`, url: issue.html_url as string, title: input.title, text: input.body });
      }
      const normal = json(201, issue);
      return behaviour.answer ? behaviour.answer(createCount, normal) : normal;
    }
    if (req.method !== 'GET') return json(404, { message: 'Not Found' });
    lookupCount += 1;
    const q = new URLSearchParams(req.query);
    const since = q.has('since') ? Date.parse(q.get('since')!) : 0;
    const perPage = Math.min(Number(q.get('per_page') ?? 30), 100);
    const page = Number(q.get('page') ?? 1);
    const state = q.get('state') ?? 'open';
    const listed = stored
      .filter((i) => Date.parse(i.updated_at) >= Math.floor(since / 1000) * 1000)
      .filter((i) => state === 'all' || i.state === state)
      .sort((a, b) => (q.get('direction') === 'asc' ? 1 : -1) * (a.number - b.number));
    const normal = json(200, listed.slice((page - 1) * perPage, page * perPage));
    return behaviour.lookupAnswer ? behaviour.lookupAnswer(lookupCount, normal) : normal;
  });
  const searches = `${apiBase}/search/issues`;
  const requests = () => [...receiver.requests(path), ...receiver.requests(searches).filter((r) => new URLSearchParams(r.query).get('q')?.includes(`repo:${repository} `))];
  const addIssues = (count: number) => {
    for (let i = 0; i < count; i++) store(`Someone else's issue ${stored.length + 1}`, 'Not from the service.');
  };
  const addIssue = (body: string, createdAt: Date) => {
    const issue = store('Someone else\'s older issue', body);
    issue.created_at = githubTime(createdAt.getTime());
    return issue;
  };
  return tracker('github', { kind: 'github', base_url: receiver.url(apiBase), repository, token }, requests, (r) => r.path === path && r.method === 'POST', issues, addIssues, addIssue);
}

/** A Jira Cloud site at {receiver}{site}, one project. */
export function fakeJira(receiver: Receiver, site: string, projectKey: string, email: string, apiToken: string, behaviour: Behaviour = {}): FakeTracker {
  const issuePath = `${site}/rest/api/3/issue`;
  const searchPath = `${site}/rest/api/3/search/jql`;
  const basic = `Basic ${Buffer.from(`${email}:${apiToken}`).toString('base64')}`;
  const stored: Array<{ id: string; key: string; fields: { summary: string; labels: string[]; created: string; project: string } }> = [];
  const issues: TrackedIssue[] = [];
  let createCount = 0;
  let lookupCount = 0;
  receiver.script(issuePath, (req) => {
    if (req.headers.authorization !== basic) return unauthorized();
    if (req.method !== 'POST') return json(405, { errorMessages: ['Method Not Allowed'] });
    createCount += 1;
    const { fields } = JSON.parse(req.body.toString()) as { fields: { project: { key: string }; summary: string; labels?: string[] } };
    if (fields.project.key !== projectKey) return json(400, { errorMessages: [], errors: { project: 'valid project is required' } });
    let created: Record<string, unknown> = {};
    if (behaviour.creates?.(createCount) ?? true) {
      const id = String(10000 + stored.length + 1);
      const key = `${projectKey}-${stored.length + 1}`;
      const labels = fields.labels ?? [];
      stored.push({ id, key, fields: { summary: fields.summary, labels, created: new Date().toISOString().replace('Z', '+0000'), project: projectKey } });
      issues.push({ key, url: `${receiver.url(site)}/browse/${key}`, title: fields.summary, text: labels.join(' ') });
      created = { id, key, self: `${receiver.url(issuePath)}/${id}` };
    }
    const normal = json(201, created);
    return behaviour.answer ? behaviour.answer(createCount, normal) : normal;
  });
  receiver.script(searchPath, (req) => {
    if (req.headers.authorization !== basic) return unauthorized();
    lookupCount += 1;
    const { jql, fields = [] } = JSON.parse(req.body.toString()) as { jql: string; fields?: string[] };
    const project = /project = "([^"]+)"/.exec(jql)?.[1];
    const label = /labels = "([^"]+)"/.exec(jql)?.[1];
    if (!project || !label) return json(400, { errorMessages: [`Error in the JQL Query: ${jql}`], errors: {} });
    const found = stored.filter((i) => i.fields.project === project && i.fields.labels.includes(label));
    const shown = found.map((i) => ({
      expand: 'renderedFields,names,schema,operations,editmeta,changelog,versionedRepresentations',
      id: i.id,
      self: `${receiver.url(issuePath)}/${i.id}`,
      key: i.key,
      fields: Object.fromEntries(fields.filter((f) => f in i.fields).map((f) => [f, i.fields[f as keyof typeof i.fields]])),
    }));
    const normal = json(200, { issues: shown, isLast: true });
    return behaviour.lookupAnswer ? behaviour.lookupAnswer(lookupCount, normal) : normal;
  });
  const requests = () => [...receiver.requests(issuePath), ...receiver.requests(searchPath)];
  return tracker(
    'jira',
    { kind: 'jira', base_url: receiver.url(site), project_key: projectKey, issue_type: 'Bug', email, api_token: apiToken },
    requests,
    (r) => r.path === issuePath,
    issues,
  );
}
