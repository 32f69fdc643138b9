// Every relative link and anchor in README.md and docs/*.md resolves: the file exists and, with a #fragment, the
// target file has a heading with that GitHub slug (or an explicit <a id>). Links inside code blocks are not links.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '../../..');
const documents = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** The document's lines outside fenced code blocks. */
function prose(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of prose(text)) {
    for (const m of line.matchAll(/<a (?:id|name)="([^"]+)"/g)) anchors.add(m[1]!);
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!
      .trim()
      .toLowerCase()
      .replace(/<[^>]+>/g, '')
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

function relativeLinks(text: string): string[] {
  const links: string[] = [];
  for (const line of prose(text)) {
    // Inline code is not a link either.
    const bare = line.replace(/`[^`]*`/g, '');
    for (const m of bare.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (!/^[a-z][a-z0-9+.-]*:/i.test(m[1]!)) links.push(m[1]!);
    }
  }
  return links;
}

describe('documentation links', () => {
  test('the README is a front door: at most ~300 lines, and it links every document under docs/', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThanOrEqual(320);
    for (const doc of documents.filter((d) => d !== 'README.md')) expect(readme).toContain(`](${doc}`);
  });

  test.each(documents)('every relative link and anchor in %s resolves', (doc) => {
    const text = readFileSync(path.join(ROOT, doc), 'utf8');
    const broken: string[] = [];
    for (const link of relativeLinks(text)) {
      const [target, fragment] = link.split('#') as [string, string | undefined];
      const file = target === '' ? path.join(ROOT, doc) : path.resolve(path.dirname(path.join(ROOT, doc)), decodeURI(target));
      if (!existsSync(file)) {
        broken.push(`${link} (no such file)`);
        continue;
      }
      if (fragment !== undefined && file.endsWith('.md') && !anchorsOf(readFileSync(file, 'utf8')).has(decodeURIComponent(fragment))) {
        broken.push(`${link} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  test('the anchor rule is GitHub\'s', () => {
    const anchors = anchorsOf('# A\n## Redis Sentinel and Cluster\n```\n# not a heading\n```\n## API-key lifecycle policy\n## Model\n## Model\n### Personal GitHub account (source:connect_personal)');
    expect([...anchors]).toEqual(['a', 'redis-sentinel-and-cluster', 'api-key-lifecycle-policy', 'model', 'model-1', 'personal-github-account-sourceconnect_personal']);
  });
});
