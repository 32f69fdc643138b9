import { orphanKeys, planSweep, uploadPrefixOfKey } from './source-sweep';

const upload = 'orgs/org_1/projects/prj_1/assessments/asm_1/src_1/';
const at = (iso: string) => new Date(iso);

describe('uploadPrefixOfKey', () => {
  it('names the upload an object belongs to, and nothing outside the layout', () => {
    expect(uploadPrefixOfKey(`${upload}archive.zip`)).toBe(upload);
    expect(uploadPrefixOfKey(`${upload}files/abc`)).toBe(upload);
    expect(uploadPrefixOfKey('orgs/org_1/projects/prj_1/assessments/asm_1/archive.zip')).toBeNull();
    expect(uploadPrefixOfKey('backups/org_1/projects/prj_1/assessments/asm_1/src_1/x')).toBeNull();
  });
});

describe('planSweep and orphanKeys', () => {
  const cutoff = at('2026-01-01T00:00:00Z');
  const old = at('2025-12-31T00:00:00Z');
  const young = at('2026-01-01T00:00:01Z');
  const other = 'orgs/org_1/projects/prj_1/assessments/asm_2/src_2/';
  const third = 'orgs/org_1/projects/prj_1/assessments/asm_3/src_3/';

  it('deletes old objects of unreferenced uploads and old partial files; keeps referenced, young and foreign ones', () => {
    const plan = planSweep(
      [
        { key: `${upload}archive.zip`, modifiedAt: old, partial: false },
        { key: `${upload}files/a`, modifiedAt: old, partial: false },
        { key: `${other}archive.zip`, modifiedAt: old, partial: false },
        { key: `${other}files/b.0a1b2c3d4e5f.partial`, modifiedAt: old, partial: true },
        { key: `${other}files/c`, modifiedAt: young, partial: false },
        { key: `${third}files/d.0a1b2c3d4e5f.partial`, modifiedAt: young, partial: true },
        { key: 'orgs/org_1/stray', modifiedAt: old, partial: false },
      ],
      cutoff,
    );
    expect([...plan.byUploadPrefix.keys()].sort()).toEqual([upload]); // other has a young object: not judged yet
    expect(orphanKeys(plan, new Set([other]))).toEqual([`${other}files/b.0a1b2c3d4e5f.partial`, `${upload}archive.zip`, `${upload}files/a`]);
    expect(orphanKeys(plan, new Set([upload, other]))).toEqual([`${other}files/b.0a1b2c3d4e5f.partial`]);
  });

  it('leaves every object of an upload alone while any of its objects is younger than the cutoff (an upload still writing)', () => {
    // An extraction that outlasts the grace period: its first objects are old, its latest one (or a put's
    // temporary file) young, and its row is committed only after the last object. None of it is an orphan yet.
    const plan = planSweep(
      [
        { key: `${upload}files/a`, modifiedAt: old, partial: false },
        { key: `${upload}files/b`, modifiedAt: young, partial: false },
        { key: `${other}files/c`, modifiedAt: old, partial: false },
        { key: `${other}files/d.0a1b2c3d4e5f.partial`, modifiedAt: young, partial: true },
      ],
      cutoff,
    );
    expect(orphanKeys(plan, new Set())).toEqual([]);
  });
});
