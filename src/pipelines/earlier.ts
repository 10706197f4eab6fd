/**
 * Pipelines in the earlier API variant (docs/api-variants.md): the records without `tag`,
 * `events` and `error_message` (and the step log read does not exist there), made from the
 * current records.
 */
import { z } from 'zod';
import { omit, shaped } from '../http/variant.ts';
import { pipelineListSchema, pipelineSchema, type PipelineJson } from './schemas.ts';

export const earlierPipelineSchema = pipelineSchema
  .omit({ tag: true, events: true, error_message: true })
  .meta({ id: 'Pipeline' });
export type EarlierPipelineJson = z.infer<typeof earlierPipelineSchema>;

export const earlierPipelineListSchema = pipelineListSchema
  .extend({ pipelines: z.array(earlierPipelineSchema) })
  .meta({ id: 'PipelineList' });

/** A pipeline as the earlier variant shows it. */
export function earlierPipeline(p: PipelineJson): EarlierPipelineJson {
  return omit(p, 'tag', 'events', 'error_message');
}

export const earlierPipelineShape = shaped(earlierPipelineSchema, earlierPipeline);
export const earlierPipelineListShape = shaped(
  earlierPipelineListSchema,
  (l: z.infer<typeof pipelineListSchema>) => ({ ...l, pipelines: l.pipelines.map(earlierPipeline) }),
);
