import { StrictMode, useEffect, type ReactNode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter, Link, Navigate, NavLink, Route, Routes, useLocation, useNavigate } from 'react-router-dom';
import { client, setUnauthorizedHandler, unwrap } from './api/client';
import { SessionProvider, useSession } from './lib/session';
import { AcceptInvitePage, ForgotPasswordPage, LoginPage, OAuthTotpPage, ResetPasswordPage, SignupPage, VerifyEmailPage } from './pages/auth';
import { ApiKeysPage, KeyPolicyPage, ProfilePage } from './pages/account';
import { AssessmentPage, AuditPage, MembersPage, ProjectPage, ProjectsPage, TeamsPage } from './pages/org';
import { ErasurePage } from './pages/governance';
import { IntegrationsPage } from './pages/integrations';
import { DeliveriesPage, DeliveryPage, SubscriptionPage, WebhooksPage } from './pages/webhooks';
import { ReportPage, SharedReportPage } from './pages/reports';
import { NotificationTargetsPage } from './pages/notification-targets';
import { IssueTrackersPage } from './pages/issue-exports';
import './style.css';

/** A 401 anywhere sends the person to log in, then back to where they were. */
function UnauthorizedRedirect() {
  const navigate = useNavigate();
  const { refresh } = useSession();
  useEffect(() => {
    setUnauthorizedHandler(() => {
      const here = window.location.pathname + window.location.search;
      void refresh();
      if (!here.startsWith('/login')) navigate(`/login?next=${encodeURIComponent(here)}`, { replace: true });
    });
  }, [navigate, refresh]);
  return null;
}

function RequireSession({ children }: { children: ReactNode }) {
  const { me, loading } = useSession();
  const location = useLocation();
  if (loading) return <p>Loading…</p>;
  if (!me) return <Navigate to={`/login?next=${encodeURIComponent(location.pathname + location.search)}`} replace />;
  return <>{children}</>;
}

function Shell({ children }: { children: ReactNode }) {
  const { me, can, refresh } = useSession();
  const navigate = useNavigate();
  const logout = async () => {
    await unwrap(client.POST('/api/v1/auth/logout')).catch(() => undefined);
    await refresh();
    navigate('/login');
  };
  return (
    <>
      <header>
        <Link to="/" className="brand">Security Assessment Service</Link>
        {me && (
          <nav aria-label="Main">
            {can('projects:read') && <NavLink to="/projects">Projects</NavLink>}
            {can('webhooks:read') && <NavLink to="/webhooks">Webhooks</NavLink>}
            {can('notification_targets:read') && <NavLink to="/notification-targets">Notifications</NavLink>}
            {can('issue_exports:read') && <NavLink to="/issue-trackers">Issue trackers</NavLink>}
            {can('members:read') && <NavLink to="/members">Members</NavLink>}
            {can('teams:read') && <NavLink to="/teams">Teams</NavLink>}
            {can('api_keys:read') && <NavLink to="/settings/api-keys">API keys</NavLink>}
            {can('audit:read') && <NavLink to="/audit">Audit log</NavLink>}
            {can('integrations:read') && <NavLink to="/integrations">Integrations</NavLink>}
            {can('governance:read') && <NavLink to="/governance/erasure">Erasure</NavLink>}
            <NavLink to="/profile">Profile</NavLink>
            <span className="who">{me.user?.email} · {me.organization?.name} ({me.role})</span>
            <button type="button" onClick={() => void logout()}>Log out</button>
          </nav>
        )}
      </header>
      {children}
    </>
  );
}

function App() {
  const signedIn = (page: ReactNode) => <RequireSession>{page}</RequireSession>;
  return (
    <Shell>
      <UnauthorizedRedirect />
      <Routes>
        <Route path="/login" element={<LoginPage />} />
        <Route path="/login/2fa" element={<OAuthTotpPage />} />
        <Route path="/signup" element={<SignupPage />} />
        <Route path="/verify-email" element={<VerifyEmailPage />} />
        <Route path="/forgot-password" element={<ForgotPasswordPage />} />
        <Route path="/reset-password" element={<ResetPasswordPage />} />
        <Route path="/accept-invite" element={<AcceptInvitePage />} />
        <Route path="/shared/reports/:token" element={<SharedReportPage />} />
        <Route path="/" element={signedIn(<Navigate to="/projects" replace />)} />
        <Route path="/profile" element={signedIn(<ProfilePage />)} />
        <Route path="/settings/api-keys" element={signedIn(<ApiKeysPage />)} />
        <Route path="/settings/api-key-policy" element={signedIn(<KeyPolicyPage />)} />
        <Route path="/members" element={signedIn(<MembersPage />)} />
        <Route path="/teams" element={signedIn(<TeamsPage />)} />
        <Route path="/audit" element={signedIn(<AuditPage />)} />
        <Route path="/governance/erasure" element={signedIn(<ErasurePage />)} />
        <Route path="/integrations" element={signedIn(<IntegrationsPage />)} />
        <Route path="/notification-targets" element={signedIn(<NotificationTargetsPage />)} />
        <Route path="/issue-trackers" element={signedIn(<IssueTrackersPage />)} />
        <Route path="/projects" element={signedIn(<ProjectsPage />)} />
        <Route path="/projects/:id" element={signedIn(<ProjectPage />)} />
        <Route path="/assessments/:id" element={signedIn(<AssessmentPage />)} />
        <Route path="/reports/:id" element={signedIn(<ReportPage />)} />
        {['/webhooks', '/projects/:projectId/webhooks', '/assessments/:assessmentId/webhooks'].map((base) => [
          <Route key={base} path={base} element={signedIn(<WebhooksPage />)} />,
          <Route key={`${base}/d`} path={`${base}/deliveries`} element={signedIn(<DeliveriesPage />)} />,
          <Route key={`${base}/d/id`} path={`${base}/deliveries/:id`} element={signedIn(<DeliveryPage />)} />,
          <Route key={`${base}/id`} path={`${base}/:id`} element={signedIn(<SubscriptionPage />)} />,
        ])}
        <Route path="*" element={<main><h1>Not found</h1><Link to="/">Home</Link></main>} />
      </Routes>
    </Shell>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <BrowserRouter>
      <SessionProvider>
        <App />
      </SessionProvider>
    </BrowserRouter>
  </StrictMode>,
);
