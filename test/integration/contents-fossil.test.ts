import { contentsSuite } from './contents-shared.ts';

// Repository contents (tree, blob, log, changeset) of a fossil repository through the API.
contentsSuite('fossil');
