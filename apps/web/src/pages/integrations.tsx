// Organization integrations: GitHub (token or App installation, optional GitHub Enterprise URL) and Slack; connect,
// disconnect, bind to teams. Credentials are typed once, sent, and never shown back (only a four-character hint).
import { useState, type FormEvent } from 'react';
import { client, unwrap } from '../api/client';
import { useSession } from '../lib/session';
import { SudoErrorBox, SudoPrompt, useSudo } from '../lib/sudo';
import { ErrorBox, Field, loadAllPages, ShowMore, useAction, useLoad, usePagedLoad } from '../lib/ui';

type Kind = 'github' | 'slack';

function ConnectForm({ onConnected }: { onConnected(): void }) {
  const [kind, setKind] = useState<Kind>('github');
  const [name, setName] = useState('');
  const [auth, setAuth] = useState<'token' | 'app_installation'>('token');
  const [credential, setCredential] = useState('');
  const [installationId, setInstallationId] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [workspaceId, setWorkspaceId] = useState('');
  const { busy, error, run } = useAction();
  // Connecting one from a sign-in more than 10 minutes old: the API asks for the password (sudo mode).
  const sudo = useSudo();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const body =
        kind === 'slack'
          ? { kind, name, bot_token: credential, workspace_id: workspaceId }
          : {
              kind,
              name,
              ...(auth === 'token' ? { token: credential } : { app_installation_id: installationId }),
              ...(baseUrl.trim() ? { base_url: baseUrl.trim() } : {}),
            };
      await sudo.send((proof) => unwrap(client.POST('/api/v1/integrations', { body: { ...body, ...proof } as never })));
      setName('');
      setCredential('');
      setInstallationId('');
      setBaseUrl('');
      setWorkspaceId('');
      onConnected();
    });
  };
  return (
    <form onSubmit={submit} aria-label="Connect an integration">
      <h2>Connect</h2>
      <div className="field">
        <label htmlFor="integration-kind">Kind</label>
        <select id="integration-kind" value={kind} onChange={(e) => setKind(e.target.value as Kind)}>
          <option value="github">GitHub</option>
          <option value="slack">Slack workspace</option>
        </select>
      </div>
      <Field label="Integration name" name="name" value={name} onChange={setName} required />
      {kind === 'github' ? (
        <>
          <div className="field">
            <label htmlFor="integration-auth">GitHub access</label>
            <select id="integration-auth" value={auth} onChange={(e) => setAuth(e.target.value as 'token')}>
              <option value="token">Token</option>
              <option value="app_installation">GitHub App installation</option>
            </select>
          </div>
          {auth === 'token'
            ? <Field label="GitHub token" name="token" type="password" autoComplete="off" value={credential} onChange={setCredential} required />
            : <Field label="App installation id" name="app_installation_id" inputMode="numeric" value={installationId} onChange={setInstallationId} required />}
          <Field label="GitHub Enterprise API URL (optional)" name="base_url" value={baseUrl} onChange={setBaseUrl} placeholder="https://ghe.example.com/api/v3" />
        </>
      ) : (
        <>
          <Field label="Slack bot token" name="bot_token" type="password" autoComplete="off" value={credential} onChange={setCredential} required />
          <Field label="Slack workspace id" name="workspace_id" value={workspaceId} onChange={setWorkspaceId} required placeholder="T0123ABCD" />
        </>
      )}
      <SudoPrompt sudo={sudo} what="connect this integration" />
      <button type="submit" disabled={busy || (sudo.asked && !sudo.hasPassword)}>Connect integration</button>
      <SudoErrorBox error={error} />
    </form>
  );
}

export function IntegrationsPage() {
  const { can } = useSession();
  const integrations = usePagedLoad((cursor) => unwrap(client.GET('/api/v1/integrations', { params: { query: { limit: 100, cursor } } })));
  // Every team (all pages): for the names of bound teams and the bind picker.
  const teams = useLoad(() =>
    can('integrations:bind_team') ? loadAllPages((cursor) => unwrap(client.GET('/api/v1/teams', { params: { query: { limit: 100, cursor } } }))) : Promise.resolve(undefined),
  );
  const teamName = (id: string) => teams.data?.data?.find((t) => t.id === id)?.name ?? id;
  const action = useAction();
  const disconnect = (id: string, name: string) => {
    if (!window.confirm(`Disconnect ${name}? Its credential and team bindings are deleted.`)) return;
    void action.run(async () => {
      await unwrap(client.DELETE('/api/v1/integrations/{id}', { params: { path: { id } } }));
      integrations.reload();
    });
  };
  const bind = (id: string, teamId: string, on: boolean) =>
    void action.run(async () => {
      const params = { params: { path: { id, team_id: teamId } } };
      await unwrap(on ? client.PUT('/api/v1/integrations/{id}/teams/{team_id}', params) : client.DELETE('/api/v1/integrations/{id}/teams/{team_id}', params));
      integrations.reload();
    });
  return (
    <main>
      <h1>Integrations</h1>
      <ErrorBox error={integrations.error ?? action.error} />
      <table>
        <thead>
          <tr><th>Name</th><th>Kind</th><th>Access</th><th>Where</th><th>Status</th><th>Teams</th><th /></tr>
        </thead>
        <tbody>
          {integrations.data?.data?.map((i) => (
            <tr key={i.id} data-testid={`integration-${i.name}`}>
              <td>{i.name}</td>
              <td>{i.kind === 'github' ? 'GitHub' : 'Slack'}</td>
              <td>{i.auth_method === 'app_installation' ? `App installation ${i.app_installation_id}` : `${i.auth_method === 'token' ? 'token' : 'bot token'} ${i.credential_hint ?? ''}`}</td>
              <td>{i.kind === 'github' ? i.base_url ?? 'github.com' : i.workspace_id}</td>
              <td><span className="badge">{i.status}</span></td>
              <td>
                {i.team_ids?.map((t) => (
                  <span key={t}>
                    {teamName(t)}{' '}
                    {can('integrations:bind_team') && <button type="button" onClick={() => bind(i.id!, t, false)}>Unbind {teamName(t)}</button>}
                  </span>
                ))}
                {can('integrations:bind_team') && teams.data?.data && (
                  <select aria-label={`Bind ${i.name} to a team`} value="" onChange={(e) => e.target.value && bind(i.id!, e.target.value, true)}>
                    <option value="">Bind to a team…</option>
                    {teams.data.data.filter((t) => !i.team_ids?.includes(t.id!)).map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
                  </select>
                )}
              </td>
              <td>{can('integrations:manage') && <button type="button" onClick={() => disconnect(i.id!, i.name!)}>Disconnect {i.name}</button>}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <ShowMore list={integrations} what="integrations" />
      {can('integrations:manage') && <ConnectForm onConnected={integrations.reload} />}
    </main>
  );
}

/** On a project's page: the integration of each kind the project uses, and why. */
export function ProjectIntegrations({ projectId }: { projectId: string }) {
  const uses = useLoad(() => unwrap(client.GET('/api/v1/projects/{id}/integrations', { params: { path: { id: projectId } } })), [projectId]);
  return (
    <section aria-label="Integrations in use">
      <h2>Integrations</h2>
      <ErrorBox error={uses.error} />
      <ul>
        {uses.data?.data?.map((u) => (
          <li key={u.kind}>
            {u.kind === 'github' ? 'GitHub' : 'Slack'}:{' '}
            {u.integration ? `${u.integration.name} (${u.source === 'team' ? 'team default' : 'organization'})` : 'none'}
          </li>
        ))}
      </ul>
    </section>
  );
}
