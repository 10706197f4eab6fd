import { contentsSuite } from './contents-shared.ts';

// Repository contents (tree, blob, log, changeset) of a git repository through the API.
contentsSuite('git');
