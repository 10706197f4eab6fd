/**
 * The parsing of issue template files and of `config.yml` (the reading from repositories of each
 * kind is in test/integration/issue-templates-pins.test.ts).
 */
import { describe, expect, test } from '@jest/globals';
import {
  chosenTemplate,
  parseTemplate,
  parseTemplateConfig,
  type TemplateSet,
} from '../../src/issues/templates.ts';
import { ApiError } from '../../src/http/errors.ts';

const problem = (file: string, text: string) => {
  const r = parseTemplate(file, text);
  return 'problem' in r ? r.problem : undefined;
};

describe('issue template files', () => {
  test('front matter keys and the body; CRLF, a byte order mark and "..." as the end are accepted', () => {
    const text =
      '\uFEFF---\r\nname:  Bug  \r\nabout: It broke\r\ntitle: "[bug] "\r\nlabels: bug, ui ,, Bug\r\nassignees: ["@ada", bob]\r\nextra: ignored\r\n...\r\n\r\nSteps:\r\n1. x\r\n';
    expect(parseTemplate('bug.md', text)).toEqual({
      file: 'bug.md',
      name: 'Bug',
      about: 'It broke',
      title: '[bug] ',
      labels: ['bug', 'ui'],
      assignees: ['ada', 'bob'],
      body: 'Steps:\n1. x\n',
    });
    expect(parseTemplate('min.md', '---\nname: 42\n---')).toMatchObject({ name: '42', about: '', body: '' });
  });

  test('a file that is no template says why', () => {
    expect(problem('a.md', '# just markdown\n')).toContain('no front matter');
    expect(problem('a.md', '---\nname: x\nno end\n')).toContain('no front matter');
    expect(problem('a.md', '---\n- a list\n---\n')).toBe('the front matter is not a set of keys');
    expect(problem('a.md', '---\nabout: x\n---\n')).toContain('"name" is required');
    expect(problem('a.md', '---\nname: ""\n---\n')).toContain('"name" is required');
    expect(problem('a.md', '---\nname: x\nname: y\n---\n')).toContain('not valid YAML');
    expect(problem('a.md', '---\nname: x\nabout: {a: 1}\n---\n')).toContain('"about" must be text');
    expect(problem('a.md', `---\nname: x\ntitle: ${'t'.repeat(1001)}\n---\n`)).toContain('"title"');
    expect(problem('a.md', '---\nname: x\nlabels: {a: 1}\n---\n')).toContain('"labels" must be a list');
    expect(problem('a.md', '---\nname: x\nassignees: [[a]]\n---\n')).toContain('"assignees" must be a list');
    expect(problem('a.md', `---\nname: x\n---\n${'b'.repeat(100_001)}`)).toContain('longer than 100000');
  });

  test('YAML aliases cannot expand without bound', () => {
    const bomb = [
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      ...Array.from({ length: 8 }, (_, i) => {
        const p = String.fromCharCode(97 + i);
        const n = String.fromCharCode(98 + i);
        return `${n}: &${n} [*${p},*${p},*${p},*${p},*${p},*${p},*${p},*${p},*${p}]`;
      }),
      'name: x',
    ].join('\n');
    expect(problem('bomb.md', `---\n${bomb}\n---\n`)).toContain('not valid YAML');
  });
});

describe('config.yml and the choice of a template', () => {
  test('blank_issues_enabled', () => {
    expect(parseTemplateConfig('blank_issues_enabled: false\ncontact_links: []\n')).toEqual({
      blankIssues: false,
    });
    expect(parseTemplateConfig('blank_issues_enabled: true')).toEqual({ blankIssues: true });
    expect(parseTemplateConfig('')).toEqual({ blankIssues: true });
    expect(parseTemplateConfig('contact_links: []')).toEqual({ blankIssues: true });
    expect(parseTemplateConfig('blank_issues_enabled: "no"')).toEqual({
      problem: '"blank_issues_enabled" must be true or false',
    });
    expect(parseTemplateConfig('[1, 2]')).toEqual({ problem: 'the configuration is not a set of keys' });
  });

  test('a blank issue where none is allowed is 422, an unknown template 404', () => {
    const t = parseTemplate('a.md', '---\nname: A\n---\n');
    if ('problem' in t) throw new Error(t.problem);
    const set: TemplateSet = {
      dir: '.triad/ISSUE_TEMPLATE',
      templates: [t],
      problems: [],
      blankIssues: false,
    };
    expect(chosenTemplate(set, 'a.md')).toBe(t);
    const status = (file: string | undefined) => {
      try {
        chosenTemplate(set, file);
        return 200;
      } catch (e) {
        return (e as ApiError).status;
      }
    };
    expect([status(''), status(undefined), status('b.md')]).toEqual([422, 422, 404]);
    expect(chosenTemplate({ ...set, blankIssues: true }, '')).toBeUndefined();
  });
});
