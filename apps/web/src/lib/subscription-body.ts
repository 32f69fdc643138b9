// What the subscription form sends: the fields of the chosen payload format only, write-only secrets only when
// typed (or explicitly removed), the three Entra ID values together or not at all. Kept apart from the form so the
// rules can be unit tested.

export interface SubscriptionFormState {
  name: string;
  url: string;
  events: string[];
  payloadFormat: string;
  /** service (SPEC's X-Service-Signature) or standard_webhooks. */
  signatureScheme: string;
  severity: string;
  status: string;
  splunkIndex: string;
  splunkChannel: string;
  /** Splunk HEC indexer acknowledgement (splunk_hec with a channel). */
  hecAck: boolean;
  /** Deliveries per second the receiver accepts; '' for no throttle. */
  rateLimit: string;
  /** Write-only: '' leaves the stored value alone. */
  authorization: string;
  removeAuthorization: boolean;
  azureTenantId: string;
  azureClientId: string;
  /** Write-only: '' leaves the stored credentials alone. */
  azureClientSecret: string;
  removeAzureCredentials: boolean;
}

/** What a subscription as the API shows it fills in (write-only values start empty); empty for a new one. */
export interface StoredSubscription {
  name: string;
  url: string;
  events: string[];
  payload_format: string;
  signature_scheme?: string;
  severity_filter?: string[] | null;
  status_filter?: string[] | null;
  splunk_index?: string | null;
  splunk_channel?: string | null;
  hec_ack?: boolean;
  rate_limit?: number | null;
}

export function subscriptionForm(initial?: StoredSubscription): SubscriptionFormState {
  return {
    name: initial?.name ?? '',
    url: initial?.url ?? '',
    events: initial?.events ?? [],
    payloadFormat: initial?.payload_format ?? 'service',
    signatureScheme: initial?.signature_scheme ?? 'service',
    severity: (initial?.severity_filter ?? []).join(', '),
    status: (initial?.status_filter ?? []).join(', '),
    splunkIndex: initial?.splunk_index ?? '',
    splunkChannel: initial?.splunk_channel ?? '',
    hecAck: initial?.hec_ack ?? false,
    rateLimit: initial?.rate_limit ? String(initial.rate_limit) : '',
    authorization: '',
    removeAuthorization: false,
    azureTenantId: '',
    azureClientId: '',
    azureClientSecret: '',
    removeAzureCredentials: false,
  };
}

export function splitList(text: string): string[] | null {
  const items = text.split(',').map((s) => s.trim()).filter(Boolean);
  return items.length ? items : null;
}

/** The request body, or a message saying what is missing before anything is sent. */
export function subscriptionBody(form: SubscriptionFormState): { body: Record<string, unknown> } | { problem: string } {
  const splunk = form.payloadFormat === 'splunk_hec';
  const sentinel = form.payloadFormat === 'microsoft_sentinel';
  const rate = form.rateLimit.trim();
  if (rate && !/^[1-9]\d{0,3}$/.test(rate)) return { problem: 'The rate limit is a whole number of deliveries per second (1 to 1000), or empty.' };
  if (splunk && form.hecAck && !form.splunkChannel.trim()) return { problem: 'Indexer acknowledgement needs the Splunk request channel.' };
  const body: Record<string, unknown> = {
    name: form.name.trim(),
    url: form.url.trim(),
    events: form.events,
    payload_format: form.payloadFormat,
    signature_scheme: form.signatureScheme,
    severity_filter: splitList(form.severity),
    status_filter: splitList(form.status),
    // Splunk fields belong to splunk_hec only: another format clears them.
    splunk_index: splunk ? form.splunkIndex.trim() || null : null,
    splunk_channel: splunk ? form.splunkChannel.trim() || null : null,
    // Indexer acknowledgement is asked on the channel: off for other formats.
    hec_ack: splunk && form.hecAck,
    rate_limit: rate ? Number(rate) : null,
  };
  if (form.removeAuthorization) body.authorization = null;
  else if (form.authorization) body.authorization = form.authorization;

  if (form.removeAzureCredentials) {
    Object.assign(body, { azure_tenant_id: null, azure_client_id: null, azure_client_secret: null });
  } else if (sentinel) {
    const azure = [form.azureTenantId.trim(), form.azureClientId.trim(), form.azureClientSecret];
    const given = azure.filter(Boolean).length;
    if (given > 0 && given < 3) {
      return { problem: 'Give the Entra tenant id, client id and client secret together (or none to keep what is stored).' };
    }
    if (given === 3) Object.assign(body, { azure_tenant_id: azure[0], azure_client_id: azure[1], azure_client_secret: azure[2] });
  }
  return { body };
}
