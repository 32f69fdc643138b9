// Which certificate authorities a receiver's TLS certificate may chain to: Node's bundled roots, plus one extra
// PEM file when configured (WEBHOOK_EXTRA_CA_FILE; tests use a CA they make). Read and parsed once, at start-up:
// building a secure context from the whole root list costs milliseconds of CPU, far too much per attempt.
import { readFileSync } from 'node:fs';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';

/** The TLS context to verify receivers with, or undefined for Node's defaults when no extra CA is configured. */
export function trustedSecureContext(extraCaFile: string | undefined): SecureContext | undefined {
  if (!extraCaFile) return undefined;
  return createSecureContext({ ca: [...rootCertificates, readFileSync(extraCaFile, 'utf8')] });
}
