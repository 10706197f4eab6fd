/**
 * Issue templates and pins through the issues service (they have no API endpoint): templates
 * pushed with git, hg and fossil are read from the default branch, `.triad/ISSUE_TEMPLATE` wins
 * over `.github/ISSUE_TEMPLATE`, `config.yml` turns blank issues off, bad files are skipped with
 * their reason; pins are for organization members, capped (409 naming the cap, also when pins
 * race), and the API's issue records stay as the spec has them.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, newTeam } from '../helpers/factories.ts';
import { pushFiles } from '../helpers/push-files.ts';
import type { RepoTarget } from '../../src/domain/repo.ts';
import type { Actor } from '../../src/domain/access.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { ApiError } from '../../src/http/errors.ts';

let s: TestServer;
let owner: TestUser;
let member: TestUser;
let stranger: TestUser;
let org: string;
let orgId: number;

beforeAll(async () => {
  s = await startTestServer({ TRIAD_MAX_PINNED_ISSUES: '2' });
  ({ owner, member, org } = await newTeam(s));
  stranger = await s.newUser();
  orgId = (await s.anon.get(`/api/v1/orgs/${org}`)).body.data.id;
});
afterAll(async () => {
  await s?.close();
});

const issues = () => s.running.services.issues;

async function repoWith(vcs: VcsKind, files: Record<string, string> | undefined): Promise<RepoTarget> {
  const r = await newRepo(owner, org, { vcs });
  if (files !== undefined) await pushFiles(vcs, r.clone, owner.token, files);
  return { org: { id: orgId, name: org }, repo: { id: r.id, orgId, name: r.name, isPrivate: false } };
}

const tpl = (name: string, extra = '', body = 'Body text\n') => `---\nname: ${name}\n${extra}---\n${body}`;

const LAYOUT = {
  'README.md': '# repo\n',
  '.triad/ISSUE_TEMPLATE/b-feature.md': tpl('Feature', 'about: An idea\nlabels: enhancement, ui\n'),
  '.triad/ISSUE_TEMPLATE/a-bug.md': tpl(
    'Bug report',
    'about: Something broke\ntitle: "[bug] "\nlabels: [bug]\nassignees:\n  - "@ada"\n',
    '## Steps\n\n1. Open it\n',
  ),
  '.triad/ISSUE_TEMPLATE/c-broken.md': '---\nabout: no name here\n---\nbody\n',
  '.triad/ISSUE_TEMPLATE/d-bad-yaml.md': '---\nname: [unclosed\n---\n',
  '.triad/ISSUE_TEMPLATE/notes.txt': 'not a template\n',
  '.triad/ISSUE_TEMPLATE/config.yml': 'blank_issues_enabled: false\ncontact_links: []\n',
  '.github/ISSUE_TEMPLATE/github.md': tpl('From GitHub'),
  '.github/ISSUE_TEMPLATE/config.yml': 'blank_issues_enabled: true\n',
};

describe('issue templates', () => {
  test.each(['git', 'hg', 'fossil'] as const)(
    'in a %s repository, .triad wins over .github, blank issues follow its config.yml, bad files are listed',
    async (vcs) => {
      const t = await repoWith(vcs, LAYOUT);
      const set = await issues().templates.read(t);
      expect(set.dir).toBe('.triad/ISSUE_TEMPLATE');
      expect(set.blankIssues).toBe(false);
      expect(set.templates).toEqual([
        {
          file: 'a-bug.md',
          name: 'Bug report',
          about: 'Something broke',
          title: '[bug] ',
          labels: ['bug'],
          assignees: ['ada'],
          body: '## Steps\n\n1. Open it\n',
        },
        {
          file: 'b-feature.md',
          name: 'Feature',
          about: 'An idea',
          title: '',
          labels: ['enhancement', 'ui'],
          assignees: [],
          body: 'Body text\n',
        },
      ]);
      expect(set.problems).toEqual([
        { file: 'c-broken.md', reason: expect.stringContaining('"name" is required') },
        { file: 'd-bad-yaml.md', reason: expect.stringContaining('not valid YAML') },
      ]);
    },
  );

  test.each(['git', 'hg', 'fossil'] as const)(
    'in a %s repository without .triad templates, .github is used; an empty repository has none',
    async (vcs) => {
      const t = await repoWith(vcs, {
        'README.md': '# repo\n',
        '.triad/ISSUE_TEMPLATE/config.yml': 'blank_issues_enabled: false\n',
        '.github/ISSUE_TEMPLATE/github.md': tpl('From GitHub'),
        '.github/ISSUE_TEMPLATE/config.yaml': 'blank_issues_enabled: [not, a, boolean]\n',
      });
      const set = await issues().templates.read(t);
      expect(set.dir).toBe('.github/ISSUE_TEMPLATE');
      expect(set.templates.map((x) => x.name)).toEqual(['From GitHub']);
      expect(set.blankIssues).toBe(true);
      expect(set.problems).toEqual([
        { file: 'config.yaml', reason: expect.stringContaining('true or false') },
      ]);
      const empty = await issues().templates.read(await repoWith(vcs, undefined));
      expect(empty).toEqual({ dir: undefined, templates: [], problems: [], blankIssues: true });
    },
  );

  test('config.yml without templates leaves blank issues on; a template above 512 KiB is not read', async () => {
    const t = await repoWith('git', {
      'README.md': '# repo\n',
      '.github/ISSUE_TEMPLATE/config.yml': 'blank_issues_enabled: false\n',
      '.github/ISSUE_TEMPLATE/huge.md': tpl('Huge', '', 'x'.repeat(600 * 1024)),
    });
    expect(await issues().templates.read(t)).toEqual({
      dir: '.github/ISSUE_TEMPLATE',
      templates: [],
      problems: [{ file: 'huge.md', reason: 'it is larger than 512 KiB' }],
      blankIssues: true,
    });
  });
});

describe('issue pins', () => {
  const actor = (u: TestUser, role?: 'owner' | 'member'): Actor => ({
    id: u.id,
    username: u.username,
    isAdmin: false,
    role,
  });
  /** 200, or the status of the ApiError the promise failed with. */
  const status = async (p: Promise<unknown>): Promise<number> => {
    try {
      await p;
      return 200;
    } catch (e) {
      if (e instanceof ApiError) return e.status;
      throw e;
    }
  };

  test('members pin and unpin up to the cap; others are refused; pins keep their order', async () => {
    const t = await repoWith('git', undefined);
    const api = `/api/v1/repos/${org}/${t.repo.name}/issues`;
    for (const title of ['one', 'two', 'three']) {
      expect((await owner.client.post(api, { title })).status).toBe(201);
    }
    const pins = issues().pins;
    expect(await status(pins.pin(t, actor(stranger), 1))).toBe(403);
    await pins.pin(t, actor(member, 'member'), 2);
    await pins.pin(t, actor(owner, 'owner'), 1);
    await pins.pin(t, actor(owner, 'owner'), 1); // again: nothing changes
    expect((await pins.list(t)).map((i) => i.number)).toEqual([2, 1]);
    const refused = await pins.pin(t, actor(owner, 'owner'), 3).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 409, code: 'limit_exceeded' });
    expect((refused as Error).message).toContain('at most 2 pinned issues');
    expect(await status(pins.pin(t, actor(owner, 'owner'), 99))).toBe(404);
    expect(await status(pins.unpin(t, actor(stranger), 2))).toBe(403);
    await pins.unpin(t, actor(member, 'member'), 2);
    await pins.pin(t, actor(member, 'member'), 3);
    expect((await pins.list(t)).map((i) => i.number)).toEqual([1, 3]);
    expect(await pins.isPinned(t, 1)).toBe(true);
    expect(await pins.isPinned(t, 2)).toBe(false);

    // a closed issue stays pinned; the API's records show no pin
    expect((await owner.client.patch(`${api}/1`, { state: 'closed' })).status).toBe(200);
    expect((await pins.list(t)).map((i) => [i.number, i.state])).toEqual([
      [1, 'closed'],
      [3, 'new'],
    ]);
    const one = await s.anon.get(`${api}/1`);
    expect(Object.keys(one.body.data).sort()).toEqual(
      [
        'assignees',
        'author',
        'body',
        'created_at',
        'id',
        'labels',
        'number',
        'severity',
        'state',
        'title',
        'updated_at',
      ].sort(),
    );
  });

  test('pins sent at the same time never pass the cap', async () => {
    const t = await repoWith('git', undefined);
    const api = `/api/v1/repos/${org}/${t.repo.name}/issues`;
    for (let i = 0; i < 6; i++) expect((await owner.client.post(api, { title: `n${i}` })).status).toBe(201);
    const results = await Promise.all(
      [1, 2, 3, 4, 5, 6].map((n) => status(issues().pins.pin(t, actor(owner, 'owner'), n))),
    );
    expect(results.filter((r) => r === 200)).toHaveLength(2);
    expect(results.filter((r) => r === 409)).toHaveLength(4);
    expect(await issues().pins.list(t)).toHaveLength(2);
  });
});
