// A certificate authority made by the test, and a receiver certificate it signed, for HTTPS on loopback.
// The CA certificate is written to a temp file: that file is WEBHOOK_EXTRA_CA_FILE for the worker.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';

export interface TestTls {
  caFile: string;
  caCert: string;
  key: string;
  cert: string;
}

export const RECEIVER_HOSTNAME = 'receiver.test';

async function makeCa() {
  return generate([{ name: 'commonName', value: 'Webhook test CA' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
}

/** A leaf for 127.0.0.1, ::1, localhost and receiver.test signed by the CA (or self-signed when no CA is given). */
export async function makeServerCertificate(ca?: { key: string; cert: string }) {
  return generate([{ name: 'commonName', value: RECEIVER_HOSTNAME }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
          { type: 2, value: 'localhost' },
          { type: 2, value: RECEIVER_HOSTNAME },
        ],
      },
    ],
    ...(ca && { ca }),
  });
}

export async function createTestTls(): Promise<TestTls> {
  const ca = await makeCa();
  const leaf = await makeServerCertificate({ key: ca.private, cert: ca.cert });
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-webhook-ca-'));
  const caFile = path.join(dir, 'ca.pem');
  writeFileSync(caFile, ca.cert);
  return { caFile, caCert: ca.cert, key: leaf.private, cert: leaf.cert };
}
