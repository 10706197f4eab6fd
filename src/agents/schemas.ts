import { z } from 'zod';
import { nonBlank } from '../http/input.ts';

export const createAgentBody = z.object({ name: z.string().trim().min(1).max(255).meta(nonBlank) });

export const newAgentSchema = z
  .object({ id: z.int(), name: z.string(), token: z.string().meta({ description: 'shown only here' }) })
  .meta({ id: 'NewAgent' });
