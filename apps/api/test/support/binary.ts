// supertest keeps JSON and text; downloads (zips, PDFs, attachments) are read as bytes with this parser.
import type http from 'node:http';
import type request from 'supertest';

export function binaryBody(res: request.Response, done: (err: Error | null, body: Buffer) => void): void {
  const stream = res as unknown as http.IncomingMessage;
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  stream.on('end', () => done(null, Buffer.concat(chunks)));
}
