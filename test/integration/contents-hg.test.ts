import { contentsSuite } from './contents-shared.ts';

// Repository contents (tree, blob, log, changeset) of a hg repository through the API.
contentsSuite('hg');
