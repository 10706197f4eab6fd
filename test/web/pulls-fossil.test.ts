import { pullSuite } from './pulls-kind.ts';

pullSuite('fossil');
