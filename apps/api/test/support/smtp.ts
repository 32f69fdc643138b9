// SMTP servers on loopback for the tests of a mail send that fails: one that refuses every recipient the way real
// servers do (quoting the address), and a port nobody listens on. Used by the API's and the worker's tests.
import { createServer, type Socket } from 'node:net';
import type { Logger } from '@svc/config';
import { createMailer, type Mailer } from '@svc/mail';

export interface RefusingSmtpServer {
  /** `smtp://127.0.0.1:<port>`, for createMailer's smtpUrl (or SMTP_URL). */
  url: string;
  /** Every address refused, as RCPT TO gave it. */
  refused: string[];
  close(): Promise<void>;
}

/** An SMTP server on a local port that refuses every recipient, quoting the address as RCPT TO gave it (as most do). */
export async function refusingSmtpServer(): Promise<RefusingSmtpServer> {
  const refused: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.write('220 mx.example.test ESMTP\r\n');
    let pending = '';
    socket.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      for (let end = pending.indexOf('\r\n'); end >= 0; end = pending.indexOf('\r\n')) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 2);
        const command = line.slice(0, 4).toUpperCase();
        if (command === 'EHLO' || command === 'HELO') socket.write('250 mx.example.test\r\n');
        else if (command === 'MAIL' || command === 'RSET' || command === 'NOOP') socket.write('250 2.1.0 OK\r\n');
        else if (command === 'RCPT') {
          const address = /<([^>]*)>/.exec(line)?.[1] ?? '';
          refused.push(address);
          socket.write(`550 5.1.1 <${address}>: Recipient address rejected: User unknown in virtual mailbox table\r\n`);
        } else if (command === 'QUIT') socket.end('221 2.0.0 Bye\r\n');
        else socket.write('502 5.5.2 Error: command not recognized\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `smtp://127.0.0.1:${port}`,
    refused,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** An SMTP URL on a local port nobody listens on: the connection is refused. */
export async function closedSmtpUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return `smtp://127.0.0.1:${port}`;
}

/** Anything shaped like an e-mail address, in a log line (or its JSON). */
export const AN_ADDRESS = /[^\s<>"]+@[^\s<>"]+/;

export type LoggedLine = [message: string, meta?: unknown];

/**
 * Runs `run` while the API's mail goes over SMTP to a server that refuses every recipient; returns the errors and
 * warnings logged meanwhile (`run` sees them as they come, to wait for one logged after the answer) and the
 * addresses the server refused.
 */
export async function whileMailRefused(
  h: { deps: { mailer: Mailer; logger: Logger }; outboxDir: string },
  run: (logged: LoggedLine[]) => Promise<void>,
): Promise<{ logged: LoggedLine[]; refused: string[] }> {
  const smtp = await refusingSmtpServer();
  const working = h.deps.mailer;
  const logged: LoggedLine[] = [];
  const spies = (['error', 'warn'] as const).map((level) =>
    jest.spyOn(h.deps.logger, level).mockImplementation(((message: string, meta?: unknown) => {
      logged.push([message, meta]);
      return h.deps.logger;
    }) as never),
  );
  h.deps.mailer = createMailer({ smtpUrl: smtp.url, from: 'svc@example.test', outboxDir: h.outboxDir });
  try {
    await run(logged);
  } finally {
    h.deps.mailer = working;
    for (const spy of spies) spy.mockRestore();
    await smtp.close();
  }
  return { logged, refused: smtp.refused };
}

/** Polls until `logged` has a line with `message` (a log written after the answer went out). */
export async function loggedLine(logged: LoggedLine[], message: string, timeoutMs = 5000): Promise<LoggedLine> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = logged.find(([m]) => m === message);
    if (line) return line;
    if (Date.now() > deadline) throw new Error(`Nothing logged as "${message}": ${JSON.stringify(logged)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
