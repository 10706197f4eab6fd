import { z } from 'zod';

export const newAgentSchema = z
  .object({ id: z.int(), name: z.string(), token: z.string().meta({ description: 'shown only here' }) })
  .meta({ id: 'NewAgent' });
