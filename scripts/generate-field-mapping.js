// Writes the "Field mapping per format" table of docs/webhooks.md from the renderers' field catalogue.
// Usage: npx tsc -b packages/webhooks && node scripts/generate-field-mapping.js
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { withFieldMapping } = require('../packages/webhooks/dist');

const readmePath = join(__dirname, '..', 'docs', 'webhooks.md');
const before = readFileSync(readmePath, 'utf8');
const after = withFieldMapping(before);
if (after !== before) writeFileSync(readmePath, after);
process.stdout.write(after === before ? 'docs/webhooks.md field mapping up to date\n' : 'docs/webhooks.md field mapping rewritten\n');
