// Unit tests of what the subscription form sends for each payload format.
import { subscriptionBody, subscriptionForm, type SubscriptionFormState } from './subscription-body';

const form = (over: Partial<SubscriptionFormState> = {}): SubscriptionFormState => ({
  ...subscriptionForm(),
  name: ' SIEM ',
  url: ' https://siem.example.test/in ',
  events: ['finding.created'],
  severity: 'critical, high',
  splunkIndex: 'sec',
  splunkChannel: '0f8fad5b-d9cb-469f-a165-70867728950e',
  ...over,
});

const bodyOf = (over: Partial<SubscriptionFormState>) => {
  const result = subscriptionBody(form(over));
  if (!('body' in result)) throw new Error(result.problem);
  return result.body;
};

describe('subscriptionBody', () => {
  it('trims, splits filters and clears the Splunk fields of another format', () => {
    expect(bodyOf({})).toEqual({
      name: 'SIEM',
      url: 'https://siem.example.test/in',
      events: ['finding.created'],
      payload_format: 'service',
      signature_scheme: 'service',
      severity_filter: ['critical', 'high'],
      status_filter: null,
      splunk_index: null,
      splunk_channel: null,
      hec_ack: false,
      rate_limit: null,
    });
  });

  it('sends the rate limit as a number, empty as none, and refuses anything else before sending', () => {
    expect(bodyOf({ rateLimit: ' 25 ' })).toMatchObject({ rate_limit: 25 });
    expect(bodyOf({ rateLimit: '' })).toMatchObject({ rate_limit: null });
    for (const bad of ['0', '-1', '2.5', 'fast', '10000']) {
      expect(subscriptionBody(form({ rateLimit: bad }))).toEqual({ problem: expect.stringMatching(/rate limit/) });
    }
  });

  it('sends hec_ack for splunk_hec only, and asks for the channel it needs before sending', () => {
    expect(bodyOf({ payloadFormat: 'splunk_hec', hecAck: true })).toMatchObject({ hec_ack: true, splunk_channel: '0f8fad5b-d9cb-469f-a165-70867728950e' });
    expect(bodyOf({ payloadFormat: 'cef', hecAck: true })).toMatchObject({ hec_ack: false, splunk_channel: null });
    expect(subscriptionBody(form({ payloadFormat: 'splunk_hec', hecAck: true, splunkChannel: ' ' }))).toEqual({ problem: expect.stringMatching(/request channel/) });
  });

  it('sends the chosen signature scheme', () => {
    expect(bodyOf({ signatureScheme: 'standard_webhooks' })).toMatchObject({ signature_scheme: 'standard_webhooks' });
  });

  it('sends the Splunk index and channel for splunk_hec', () => {
    expect(bodyOf({ payloadFormat: 'splunk_hec' })).toMatchObject({
      splunk_index: 'sec',
      splunk_channel: '0f8fad5b-d9cb-469f-a165-70867728950e',
    });
    expect(bodyOf({ payloadFormat: 'splunk_hec', splunkChannel: ' ' })).toMatchObject({ splunk_channel: null });
  });

  it('sends the authorization only when typed, and null when removed', () => {
    expect(bodyOf({})).not.toHaveProperty('authorization');
    expect(bodyOf({ authorization: 'Splunk abc' })).toMatchObject({ authorization: 'Splunk abc' });
    expect(bodyOf({ authorization: 'Splunk abc', removeAuthorization: true })).toMatchObject({ authorization: null });
  });

  it('sends the three Entra values together for microsoft_sentinel, or none, and refuses a partial set', () => {
    const sentinel = { payloadFormat: 'microsoft_sentinel' };
    expect(bodyOf(sentinel)).not.toHaveProperty('azure_client_secret');
    expect(bodyOf({ ...sentinel, azureTenantId: 'contoso.onmicrosoft.com', azureClientId: 'c1', azureClientSecret: 's3cret' })).toMatchObject({
      azure_tenant_id: 'contoso.onmicrosoft.com',
      azure_client_id: 'c1',
      azure_client_secret: 's3cret',
    });
    expect(subscriptionBody(form({ ...sentinel, azureClientSecret: 's3cret' }))).toEqual({ problem: expect.stringMatching(/together/) });
    // Typed into a form of another format: not sent.
    expect(bodyOf({ azureTenantId: 't', azureClientId: 'c', azureClientSecret: 's' })).not.toHaveProperty('azure_client_secret');
  });

  it('removes the Entra credentials with three nulls', () => {
    expect(bodyOf({ payloadFormat: 'microsoft_sentinel', removeAzureCredentials: true, azureClientSecret: 'ignored' })).toMatchObject({
      azure_tenant_id: null,
      azure_client_id: null,
      azure_client_secret: null,
    });
  });
});

describe('subscriptionForm', () => {
  it('fills an edit form from the stored subscription, leaving write-only values empty', () => {
    expect(
      subscriptionForm({
        name: 'SIEM',
        url: 'https://siem.example.test/in',
        events: ['finding.created'],
        payload_format: 'splunk_hec',
        severity_filter: ['critical', 'high'],
        status_filter: null,
        splunk_index: 'sec',
        splunk_channel: null,
        signature_scheme: 'standard_webhooks',
        hec_ack: true,
      }),
    ).toEqual({
      ...subscriptionForm(),
      name: 'SIEM',
      url: 'https://siem.example.test/in',
      events: ['finding.created'],
      payloadFormat: 'splunk_hec',
      severity: 'critical, high',
      splunkIndex: 'sec',
      signatureScheme: 'standard_webhooks',
      hecAck: true,
    });
  });

  it('starts a new subscription empty, in the service format', () => {
    expect(subscriptionForm()).toMatchObject({ name: '', url: '', events: [], payloadFormat: 'service', signatureScheme: 'service', authorization: '', azureClientSecret: '' });
  });
});
