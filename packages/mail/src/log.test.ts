import { isRecipientRefused, mailErrorForLog } from './index';

const REFUSED = (address: string) => `Can't send mail - all recipients were rejected: 550 5.1.1 <${address}>: Recipient address rejected: User unknown`;
const REFUSED_LOGGED = (stand: string) => `Can't send mail - all recipients were rejected: 550 5.1.1 <${stand}>: Recipient address rejected: User unknown`;

describe('mailErrorForLog', () => {
  it('takes the recipient out as stored', () => {
    expect(mailErrorForLog(new Error(REFUSED('ada@example.com')), 'ada@example.com')).toBe(REFUSED_LOGGED('<recipient>'));
    expect(mailErrorForLog(new Error(REFUSED('a.b+tag@example.com')), ['a.b+tag@example.com'])).toBe(REFUSED_LOGGED('<recipient>'));
  });

  it.each([
    ['an international domain punycoded (as it goes over SMTP)', 'ada@bücher.example', 'ada@xn--bcher-kva.example'],
    ['a punycoded domain in Unicode', 'ada@xn--bcher-kva.example', 'ada@bücher.example'],
    ['the server writing it in capitals', 'ada@example.com', 'ADA@EXAMPLE.COM'],
    ['a domain in another case', 'ada@example.com', 'ada@Example.Com'],
    ['punycode in capitals', 'ada@bücher.example', 'Ada@XN--BCHER-KVA.EXAMPLE'],
    ['a Unicode local part in another case', 'jörg@bücher.example', 'JÖRG@BÜCHER.EXAMPLE'],
    ['a fully qualified domain (its trailing dot)', 'ada@example.com', 'ada@example.com.'],
  ])('takes the recipient out when the server quotes it differently: %s', (_what, stored, quoted) => {
    expect(mailErrorForLog(new Error(REFUSED(quoted)), stored)).toMatch(/^Can't send mail - all recipients were rejected: 550 5\.1\.1 <<recipient>\.?>: Recipient/);
  });

  it('takes addresses in angle brackets out, in SMTP commands and in headers', () => {
    expect(mailErrorForLog(new Error('RCPT TO:<ada@example.com> failed: 550'), 'ada@example.com')).toBe('RCPT TO:<<recipient>> failed: 550');
    expect(mailErrorForLog(new Error('MAIL FROM:<bounce@sender.example> refused'))).toBe('MAIL FROM:<<address>> refused');
    expect(mailErrorForLog(new Error('To: "Ada Lovelace" <ada@example.com>, <grace@example.com>'), 'ada@example.com')).toBe(
      'To: "Ada Lovelace" <<recipient>>, <<address>>',
    );
  });

  it('takes several addresses out: each recipient, and any other address', () => {
    const message = '550 <ada@example.com> unknown; 550 <Grace@Example.com> unknown; forwarded to carol@elsewhere.example (mailbox full)';
    expect(mailErrorForLog(new Error(message), ['ada@example.com', 'grace@example.com'])).toBe(
      '550 <<recipient>> unknown; 550 <<recipient>> unknown; forwarded to <address> (mailbox full)',
    );
    expect(mailErrorForLog(new Error(message))).toBe('550 <<address>> unknown; 550 <<address>> unknown; forwarded to <address> (mailbox full)');
  });

  it('takes out an address that is not a recipient, whatever its shape', () => {
    expect(mailErrorForLog(new Error('postmaster@mx.example says no'), 'ada@example.com')).toBe('<address> says no');
    expect(mailErrorForLog(new Error('rejected "ada lovelace"@example.com'))).toBe('rejected <address>');
    expect(mailErrorForLog(new Error('rejected ada@[192.0.2.1]: no relay'))).toBe('rejected <address>: no relay');
    expect(mailErrorForLog(new Error('rejected ada@example.com.'))).toBe('rejected <address>');
  });

  it('does not take a recipient for part of a longer address (nor leave that one half in)', () => {
    expect(mailErrorForLog(new Error('550 <grace-ada@example.com.test> unknown'), 'ada@example.com')).toBe('550 <<address>> unknown');
    expect(mailErrorForLog(new Error('550 <a.b+tagXexample@example.com> unknown'), 'a.b+tag@example.com')).toBe('550 <<address>> unknown');
  });

  it("takes the recipient out of an outbox transport's path", () => {
    const err = Object.assign(new Error("ENOTDIR: not a directory, mkdir '/dev/null/ada@example.com'"), { code: 'ENOTDIR' });
    expect(mailErrorForLog(err, 'ada@example.com')).toBe("ENOTDIR: not a directory, mkdir '/dev/null/<recipient>'");
  });

  it('is the message of an Error, not its name; a thrown value that is no Error becomes its string', () => {
    expect(mailErrorForLog(new TypeError('Greeting never received'))).toBe('Greeting never received');
    expect(mailErrorForLog('550 mailbox ada@example.com unavailable', ['ada@example.com'])).toBe('550 mailbox <recipient> unavailable');
    expect(mailErrorForLog({ toString: () => 'refused grace@example.com' })).toBe('refused <address>');
    expect(mailErrorForLog(421)).toBe('421');
    expect(mailErrorForLog(undefined)).toBe('undefined');
    expect(mailErrorForLog(null)).toBe('null');
  });

  it.each([
    'connect ECONNREFUSED 127.0.0.1:25',
    'Invalid login: 535 5.7.8 Authentication credentials invalid',
    'Greeting never received',
    '421 4.7.0 mx.example.com: too many connections from 192.0.2.7, try again later',
    'unexpected "@" in the reply of @mx',
    '',
  ])('leaves a message without an address as it is: %j', (message) => {
    expect(mailErrorForLog(new Error(message), ['ada@example.com'])).toBe(message);
  });

  it('ignores recipients that are no address', () => {
    expect(mailErrorForLog(new Error('550 <ada@example.com> unknown'), ['', 'ada', '@example.com'])).toBe('550 <<address>> unknown');
  });
});

describe('isRecipientRefused', () => {
  const refusal = (command: string, response: string) =>
    Object.assign(new Error(`Can't send mail: ${response}`), { code: 'EENVELOPE', command, response, responseCode: Number(response.slice(0, 3)) });
  it('is true for addresses refused for good at RCPT TO (5.1.x)', () => {
    expect(isRecipientRefused(refusal('RCPT TO', '550 5.1.1 <a@b.example>: Recipient address rejected: User unknown'))).toBe(true);
    expect(isRecipientRefused(refusal('RCPT TO', '553 5.1.3 Bad recipient address syntax'))).toBe(true);
    expect(isRecipientRefused(refusal('RCPT TO', '550-5.1.1 The email account that you tried to reach does not exist.'))).toBe(true);
  });
  it("is false for a refusal of the service's own mail setup, one to try later, a server out of reach, anything else", () => {
    expect(isRecipientRefused(refusal('RCPT TO', '554 5.7.1 <a@b.example>: Relay access denied'))).toBe(false);
    expect(isRecipientRefused(refusal('MAIL FROM', '553 5.1.8 <svc@example.test>: Sender address rejected: not owned'))).toBe(false);
    expect(isRecipientRefused(refusal('DATA', '554 5.6.0 Message refused'))).toBe(false);
    expect(isRecipientRefused(refusal('RCPT TO', '450 4.2.0 Mailbox busy, try later'))).toBe(false);
    expect(isRecipientRefused(refusal('RCPT TO', '550 Requested action not taken'))).toBe(false);
    expect(isRecipientRefused(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ESOCKET' }))).toBe(false);
    expect(isRecipientRefused(new Error('boom'))).toBe(false);
    expect(isRecipientRefused(null)).toBe(false);
  });
});
