// Projects, assessments and findings; members and invitations; the audit log.
import { useState, type FormEvent } from 'react';
import { Link, useParams } from 'react-router-dom';
import { client, unwrap } from '../api/client';
import { useSession } from '../lib/session';
import { SudoConfirmation, SudoErrorBox, SudoPrompt, useSudo, useSudoChange } from '../lib/sudo';
import { ErrorBox, Field, loadAllPages, ShowMore, useAction, useLoad, usePagedLoad, When } from '../lib/ui';
import { AssessmentSourceSection, ProjectSourceSection, type ProjectSource } from './source';
import { AssessmentReports } from './reports';
import { ProjectIntegrations } from './integrations';
import { FindingIssues } from './issue-exports';

function CreateByName({ label, onCreate }: { label: string; onCreate(name: string): Promise<void> }) {
  const [name, setName] = useState('');
  const { busy, error, run } = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      await onCreate(name);
      setName('');
    });
  };
  return (
    <form onSubmit={submit} className="inline" aria-label={label}>
      <Field label={`${label}: name`} name="name" value={name} onChange={setName} required />
      <button type="submit" disabled={busy}>{label}</button>
      <ErrorBox error={error} />
    </form>
  );
}

export function ProjectsPage() {
  const { can } = useSession();
  const projects = usePagedLoad((cursor) => unwrap(client.GET('/api/v1/projects', { params: { query: { limit: 100, cursor } } })));
  return (
    <main>
      <h1>Projects</h1>
      <ErrorBox error={projects.error} />
      <ul>
        {projects.data?.data?.map((p) => (
          <li key={p.id}>
            <Link to={`/projects/${p.id}`}>{p.name}</Link>
          </li>
        ))}
      </ul>
      <ShowMore list={projects} what="projects" />
      {projects.data?.data?.length === 0 && <p>No projects yet.</p>}
      {can('projects:create') && (
        <CreateByName
          label="Create project"
          onCreate={async (name) => {
            await unwrap(client.POST('/api/v1/projects', { body: { name } }));
            projects.reload();
          }}
        />
      )}
    </main>
  );
}

export function ProjectPage() {
  const { id = '' } = useParams();
  const { can } = useSession();
  const project = useLoad(() => unwrap(client.GET('/api/v1/projects/{id}', { params: { path: { id } } })), [id]);
  const assessments = usePagedLoad(
    (cursor) => unwrap(client.GET('/api/v1/assessments', { params: { query: { limit: 100, project_id: id, cursor } } })),
    [id],
  );
  return (
    <main>
      <h1>Project {project.data?.name}</h1>
      <ErrorBox error={project.error ?? assessments.error} />
      {can('webhooks:read') && <p><Link to={`/projects/${id}/webhooks`}>Project webhooks</Link></p>}
      {project.data && <ProjectSourceSection projectId={id} source={project.data.source as ProjectSource | null} onChange={project.reload} />}
      {can('integrations:read') && <ProjectIntegrations projectId={id} />}
      <h2>Assessments</h2>
      <ul>
        {assessments.data?.data?.map((a) => (
          <li key={a.id}>
            <Link to={`/assessments/${a.id}`}>{a.name}</Link> <span className="badge">{a.status}</span>
          </li>
        ))}
      </ul>
      <ShowMore list={assessments} what="assessments" />
      {can('assessments:create') && (
        <CreateByName
          label="Create assessment"
          onCreate={async (name) => {
            await unwrap(client.POST('/api/v1/projects/{id}/assessments', { params: { path: { id } }, body: { name } }));
            assessments.reload();
          }}
        />
      )}
    </main>
  );
}

export function AssessmentPage() {
  const { id = '' } = useParams();
  const { can } = useSession();
  const assessment = useLoad(() => unwrap(client.GET('/api/v1/assessments/{id}', { params: { path: { id } } })), [id]);
  const findings = usePagedLoad(
    (cursor) => unwrap(client.GET('/api/v1/findings', { params: { query: { limit: 100, assessment_id: id, cursor } } })),
    [id],
  );
  return (
    <main>
      <h1>Assessment {assessment.data?.name}</h1>
      <p>Status: <span className="badge">{assessment.data?.status}</span></p>
      <ErrorBox error={assessment.error ?? findings.error} />
      {can('webhooks:read') && <p><Link to={`/assessments/${id}/webhooks`}>Assessment webhooks</Link></p>}
      {assessment.data && (
        <AssessmentSourceSection assessmentId={id} status={assessment.data.status} projectId={assessment.data.project_id} />
      )}
      <h2>Findings</h2>
      <table>
        <thead>
          <tr><th>Title</th><th>Severity</th><th>Status</th><th>Found</th><th>Issues</th></tr>
        </thead>
        <tbody>
          {findings.data?.data?.map((f) => (
            <tr key={f.id} id={`finding-${f.id}`} data-testid={`finding-${f.title}`}>
              <td>{f.title}</td>
              <td><span className={`badge sev-${f.severity}`}>{f.severity}</span></td>
              <td>{f.status}</td>
              <td><When at={f.created_at} /></td>
              <td><FindingIssues findingId={f.id} /></td>
            </tr>
          ))}
        </tbody>
      </table>
      <ShowMore list={findings} what="findings" />
      {findings.data?.data?.length === 0 && <p>No findings.</p>}
      {can('reports:read') && <AssessmentReports assessmentId={id} />}
    </main>
  );
}

const ROLES = ['admin', 'manager', 'member'] as const;

export function MembersPage() {
  const { can, me } = useSession();
  const members = usePagedLoad((cursor) => unwrap(client.GET('/api/v1/members', { params: { query: { limit: 100, cursor } } })));
  const invitations = usePagedLoad((cursor) =>
    can('members:invite') ? unwrap(client.GET('/api/v1/invitations', { params: { query: { limit: 100, cursor } } })) : Promise.resolve({ data: [], next_cursor: null }),
  );
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<(typeof ROLES)[number]>('member');
  const action = useAction();
  const inviteSudo = useSudo();
  const invite = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      await inviteSudo.send((proof) => unwrap(client.POST('/api/v1/invitations', { body: { email, role, ...proof } })));
      setEmail('');
      invitations.reload();
    });
  };
  const remove = (userId: string, label: string) => {
    if (!window.confirm(`Remove ${label} from the organization?`)) return;
    void action.run(async () => {
      await unwrap(client.DELETE('/api/v1/members/{user_id}', { params: { path: { user_id: userId } } }));
      members.reload();
    });
  };
  // A role raised or ownership transferred from a sign-in more than 10 minutes old: the API asks for the password
  // (sudo mode), and the change waits in a confirmation form.
  const change = useSudoChange(action.run, members.reload);
  const changeRole = (userId: string, label: string, newRole: (typeof ROLES)[number]) =>
    change.start({
      form: 'Confirm the role change',
      what: `make ${label} ${newRole === 'admin' ? 'an' : 'a'} ${newRole}`,
      submit: `Make ${label} ${newRole}`,
      send: (proof) => unwrap(client.PATCH('/api/v1/members/{user_id}', { params: { path: { user_id: userId } }, body: { role: newRole, ...proof } })),
    });
  const transfer = (userId: string, label: string) => {
    if (!window.confirm(`Make ${label} the owner? You become an admin.`)) return;
    change.start({
      form: 'Confirm the ownership transfer',
      what: `make ${label} the owner`,
      submit: `Transfer ownership to ${label}`,
      send: (proof) => unwrap(client.POST('/api/v1/organization/transfer-ownership', { body: { user_id: userId, ...proof } })),
    });
  };
  return (
    <main>
      <h1>Members</h1>
      <SudoErrorBox error={members.error ?? action.error} />
      <SudoConfirmation change={change} busy={action.busy} />
      <table>
        <thead><tr><th>Name</th><th>E-mail</th><th>Role</th><th /></tr></thead>
        <tbody>
          {members.data?.data?.map((m) => {
            const userId = m.user_id ?? '';
            const self = userId === me?.user?.id;
            return (
              <tr key={userId}>
                <td>{m.name}</td>
                <td>{m.email}</td>
                <td>
                  {can('members:change_role') && !self && m.role !== 'owner' ? (
                    <select aria-label={`Role of ${m.email}`} value={m.role} onChange={(e) => changeRole(userId, m.email ?? '', e.target.value as (typeof ROLES)[number])}>
                      {ROLES.map((r) => <option key={r}>{r}</option>)}
                    </select>
                  ) : (
                    m.role
                  )}
                </td>
                <td>
                  {can('members:remove') && !self && m.role !== 'owner' && (
                    <button type="button" onClick={() => remove(userId, m.email ?? '')}>Remove</button>
                  )}
                  {can('org:transfer_ownership') && !self && (
                    <button type="button" onClick={() => transfer(userId, m.email ?? '')}>Transfer ownership</button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <ShowMore list={members} what="members" />
      {can('members:invite') && (
        <>
          <h2>Invitations</h2>
          <ul>
            {invitations.data?.data?.map((i) => (
              <li key={i.id}>{i.email} ({i.role}) — {i.status}, expires <When at={i.expires_at} /></li>
            ))}
          </ul>
          <ShowMore list={invitations} what="invitations" />
          <form onSubmit={invite} aria-label="Invite a member">
            <Field label="E-mail to invite" name="invite-email" type="email" value={email} onChange={setEmail} required />
            <div className="field">
              <label htmlFor="invite-role">Invitation role</label>
              <select id="invite-role" value={role} onChange={(e) => setRole(e.target.value as typeof role)}>
                {ROLES.map((r) => <option key={r}>{r}</option>)}
              </select>
            </div>
            <SudoPrompt sudo={inviteSudo} what="send this invitation" />
            <button type="submit" disabled={action.busy || (inviteSudo.asked && !inviteSudo.hasPassword)}>Send invitation</button>
          </form>
        </>
      )}
    </main>
  );
}

const AUDIT_FILTERS = [
  ['action', 'Action (e.g. api_key.created)'],
  ['actor_id', 'Actor id'],
  ['target_id', 'Target id'],
  ['since', 'Since (ISO date)'],
  ['until', 'Until (ISO date)'],
] as const;

type AuditEvent = {
  id: string;
  created_at: string;
  action: string;
  actor_type: string;
  actor_label: string | null;
  actor_id: string | null;
  target_type: string | null;
  target_id: string | null;
  ip: string | null;
};

export function AuditPage() {
  const [draft, setDraft] = useState<Record<string, string>>({});
  const [filters, setFilters] = useState<Record<string, string>>({});
  const [cursor, setCursor] = useState<string | undefined>();
  const active = Object.fromEntries(Object.entries(filters).filter(([, v]) => v.trim()));
  const events = useLoad(
    () => unwrap(client.GET('/api/v1/audit-events', { params: { query: { limit: 50, ...active, ...(cursor ? { cursor } : {}) } as never } })),
    [JSON.stringify(active), cursor],
  );
  const page = events.data as { data: AuditEvent[]; next_cursor: string | null } | undefined;
  const exportHref = (format: string) => `/api/v1/audit-events/export?${new URLSearchParams({ ...active, format })}`;
  return (
    <main>
      <h1>Audit log</h1>
      <form
        className="inline"
        onSubmit={(e) => {
          e.preventDefault();
          setCursor(undefined);
          setFilters(draft);
        }}
      >
        {AUDIT_FILTERS.map(([key, label]) => (
          <Field key={key} label={label} name={key} value={draft[key] ?? ''} onChange={(v) => setDraft({ ...draft, [key]: v })} />
        ))}
        <button type="submit">Filter</button>
        <a className="button" href={exportHref('jsonl')}>Export (JSON lines)</a>
        <a className="button" href={exportHref('csv')}>Export (CSV)</a>
      </form>
      <ErrorBox error={events.error} />
      <table>
        <thead><tr><th>When</th><th>Action</th><th>Actor</th><th>Target</th><th>IP</th></tr></thead>
        <tbody>
          {page?.data.map((ev) => (
            <tr key={ev.id}>
              <td><When at={ev.created_at} /></td>
              <td>{ev.action}</td>
              <td>{ev.actor_label ?? ev.actor_id ?? ev.actor_type}</td>
              <td>{ev.target_type ? `${ev.target_type} ${ev.target_id ?? ''}` : '—'}</td>
              <td>{ev.ip ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {page?.next_cursor && <button type="button" onClick={() => setCursor(page.next_cursor!)}>Next page</button>}
    </main>
  );
}

type Candidate = { user_id?: string; email?: string };

function TeamMembers({ teamId, teamName, candidates }: { teamId: string; teamName: string; candidates: Candidate[] }) {
  const { can, me } = useSession();
  const members = usePagedLoad(
    (cursor) => unwrap(client.GET('/api/v1/teams/{id}/members', { params: { path: { id: teamId }, query: { limit: 100, cursor } } })),
    [teamId],
  );
  const [userId, setUserId] = useState('');
  const action = useAction();
  const add = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      await unwrap(client.PUT('/api/v1/teams/{id}/members/{user_id}', { params: { path: { id: teamId, user_id: userId } } }));
      members.reload();
    });
  };
  const remove = (memberId: string) =>
    void action.run(async () => {
      await unwrap(client.DELETE('/api/v1/teams/{id}/members/{user_id}', { params: { path: { id: teamId, user_id: memberId } } }));
      members.reload();
    });
  const manage = can('teams:manage_members');
  return (
    <>
      <ErrorBox error={members.error ?? action.error} />
      <ul>
        {members.data?.data?.map((m) => (
          <li key={m.user_id}>
            {m.name} ({m.email}){' '}
            {manage && <button type="button" onClick={() => remove(m.user_id!)}>Remove from {teamName}</button>}
          </li>
        ))}
      </ul>
      <ShowMore list={members} what={`members of ${teamName}`} />
      {manage && (
        <form className="inline" onSubmit={add}>
          <div className="field">
            <label htmlFor={`add-${teamId}`}>Add a member to {teamName}</label>
            <select id={`add-${teamId}`} value={userId} onChange={(e) => setUserId(e.target.value)} required>
              <option value="">choose…</option>
              {/* Not yourself: the API refuses it (a team's grants would be access you gave yourself). */}
              {candidates.filter((m) => m.user_id !== me?.user?.id).map((m) => <option key={m.user_id} value={m.user_id}>{m.email}</option>)}
            </select>
          </div>
          <button type="submit" disabled={action.busy || !userId}>Add</button>
        </form>
      )}
    </>
  );
}

export function TeamsPage() {
  const { can } = useSession();
  const teams = usePagedLoad((cursor) => unwrap(client.GET('/api/v1/teams', { params: { query: { limit: 100, cursor } } })));
  // The organization's members, every page, once for all the teams' "add a member" pickers.
  const candidates = useLoad(() =>
    can('teams:manage_members') && can('members:read')
      ? loadAllPages((cursor) => unwrap(client.GET('/api/v1/members', { params: { query: { limit: 100, cursor } } })))
      : Promise.resolve({ data: [] }),
  );
  const action = useAction();
  const remove = (id: string, name: string) => {
    if (!window.confirm(`Delete the team ${name}?`)) return;
    void action.run(async () => {
      await unwrap(client.DELETE('/api/v1/teams/{id}', { params: { path: { id } } }));
      teams.reload();
    });
  };
  return (
    <main>
      <h1>Teams</h1>
      <ErrorBox error={teams.error ?? action.error} />
      {teams.data?.data?.map((t) => (
        <section key={t.id}>
          <h2>{t.name}</h2>
          {t.description && <p>{t.description}</p>}
          <TeamMembers teamId={t.id!} teamName={t.name!} candidates={candidates.data?.data ?? []} />
          {can('teams:delete') && <button type="button" onClick={() => remove(t.id!, t.name!)}>Delete team {t.name}</button>}
        </section>
      ))}
      <ShowMore list={teams} what="teams" />
      {can('teams:create') && (
        <CreateByName
          label="Create team"
          onCreate={async (name) => {
            await unwrap(client.POST('/api/v1/teams', { body: { name } }));
            teams.reload();
          }}
        />
      )}
    </main>
  );
}
