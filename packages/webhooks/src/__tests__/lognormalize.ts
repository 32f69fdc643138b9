// Independent check: liblognorm's strict CEF parser (`lognormalizer`, Debian package liblognorm-utils).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ParsedCef {
  DeviceVendor: string;
  DeviceProduct: string;
  DeviceVersion: string;
  SignatureID: string;
  Name: string;
  Severity: string;
  Extensions: Record<string, string>;
}

export const INSTALL_HINT = 'lognormalizer not found: install liblognorm-utils (apt-get install -y liblognorm-utils)';

/** Parses CEF lines with lognormalizer; a line that does not parse throws. */
export function lognormalize(lines: string[]): ParsedCef[] {
  const workDir = mkdtempSync(join(tmpdir(), 'cef-lognorm-'));
  try {
    const rulebase = join(workDir, 'cef.rulebase');
    writeFileSync(rulebase, 'version=2\nrule=:%cef:cef%\n');
    // liblognorm drops the first letter of the first extension key when no space follows the severity's `|`.
    const input = lines
      .map((line) => {
        if (/[\r\n]/.test(line)) throw new Error('CEF line contains a line break');
        return line.replace(/^((?:[^|\\]|\\.)*(?:\|(?:[^|\\]|\\.)*){6}\|)/, '$1 ');
      })
      .join('\n');
    const result = spawnSync('lognormalizer', ['-r', rulebase, '-e', 'json'], { input: `${input}\n`, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    if (result.error && (result.error as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(INSTALL_HINT);
    if (result.status !== 0) throw new Error(`lognormalizer failed (${result.status}): ${result.stderr}`);
    const outputs = result.stdout.split('\n').filter((l) => l.trim() !== '');
    if (outputs.length !== lines.length) throw new Error(`lognormalizer gave ${outputs.length} results for ${lines.length} lines`);
    return outputs.map((out, i) => {
      const json = JSON.parse(out);
      if (!json.cef) throw new Error(`lognormalizer could not parse line ${i}: ${lines[i].slice(0, 300)}\n${out.slice(0, 300)}`);
      return json.cef as ParsedCef;
    });
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}
