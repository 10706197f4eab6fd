/** The code pages of a Fossil repository in a real browser (the shared suite of test/web/code-kind.ts). */
import { kindSuite } from './code-kind.ts';

kindSuite('fossil', {
  emptyCommands: ['fossil clone URL', 'fossil open ../', 'fossil add .', 'fossil commit -m'],
  refs: [],
});
