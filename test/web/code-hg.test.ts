/** The code pages of a Mercurial repository in a real browser (the shared suite of test/web/code-kind.ts). */
import { kindSuite } from './code-kind.ts';

kindSuite('hg', { emptyCommands: ['hg init', 'hg commit -m', 'hg push URL'], refs: ['bm1'] });
