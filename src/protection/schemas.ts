import { z } from 'zod';
import { timestamp } from '../http/responses.ts';

/** Request and response shapes of protected refs (DESIGN.md section 5, "Protected refs"). */

const pattern = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(255)
  .refine((p) => !/[\s\0]/.test(p), 'must not contain white space')
  .refine((p) => !p.startsWith('refs/'), 'names a branch or bookmark, not a full ref (leave out refs/heads/)')
  .meta({
    description:
      'glob on branch or bookmark names: `*` within one `/`-separated segment, `**` across segments (`main`, `release/*`, `@`)',
  });

const username = z.string().trim().min(1).max(64);

export const pushSchema = z
  .union([
    z.enum(['owners', 'members']),
    z.strictObject({
      users: z
        .array(username)
        .max(100)
        .transform((u) => [...new Set(u)]),
    }),
  ])
  .meta({
    description:
      'who may move a matching ref: org owners, every org member, or the users named (`{users: [...]}`)',
  });

const contexts = z
  .array(z.string().trim().min(1).max(255))
  .max(50)
  .transform((c) => [...new Set(c)])
  .meta({ description: 'status contexts that must be `success` on a pull request before it merges' });

const fields = {
  pattern,
  fast_forward_only: z.boolean().meta({ description: 'refuse updates that rewrite history (force pushes)' }),
  allow_deletion: z.boolean().meta({ description: 'whether a matching ref may be deleted' }),
  push: pushSchema,
  require_pipeline: z
    .boolean()
    .meta({ description: "a pull request into a matching ref merges only when Triad's pipeline passed" }),
  required_contexts: contexts,
};

export const createProtectionBody = z
  .strictObject({
    pattern,
    fast_forward_only: fields.fast_forward_only.default(true),
    allow_deletion: fields.allow_deletion.default(false),
    push: pushSchema.default('members'),
    require_pipeline: fields.require_pipeline.default(false),
    required_contexts: contexts.default([]),
  })
  .meta({ id: 'CreateProtection' });
export type CreateProtectionBody = z.output<typeof createProtectionBody>;

export const updateProtectionBody = z
  .strictObject({
    pattern: fields.pattern.optional(),
    fast_forward_only: fields.fast_forward_only.optional(),
    allow_deletion: fields.allow_deletion.optional(),
    push: pushSchema.optional(),
    require_pipeline: fields.require_pipeline.optional(),
    required_contexts: contexts.optional(),
  })
  .meta({ id: 'UpdateProtection' });
export type UpdateProtectionBody = z.output<typeof updateProtectionBody>;

export const protectionSchema = z
  .object({ id: z.int(), ...fields, created_at: timestamp })
  .meta({ id: 'Protection' });
