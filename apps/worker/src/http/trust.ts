// Which certificate authorities a receiver's TLS certificate may chain to: Node's bundled roots, plus one extra
// PEM file when configured (WEBHOOK_EXTRA_CA_FILE; tests use a CA they make). Read once, at start-up.
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';

/** The CA list to pass to TLS, or undefined for Node's defaults when no extra CA is configured. */
export function trustedCertificateAuthorities(extraCaFile: string | undefined): string[] | undefined {
  if (!extraCaFile) return undefined;
  return [...rootCertificates, readFileSync(extraCaFile, 'utf8')];
}
