// Generated from the served OpenAPI document by openapi-typescript, for the paths test/client/
// triad-client.ts calls (test/client/generate.ts). Do not edit: to rewrite it, run
//   UPDATE_CLIENT_TYPES=1 NODE_OPTIONS=--experimental-vm-modules npx jest test/integration/openapi-tools.test.ts
export interface paths {
    "/api/v1/repos/{org}/{repo}/releases": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Releases, newest first (drafts only for org members whose token has releases:read and reaches the repository) */
        get: operations["listReleases"];
        put?: never;
        /** Create a release (releases:write, org member); with `target_commitish` a missing tag is created there (a `tag` event, CI), for a draft only when it is published */
        post: operations["createRelease"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/repos/{org}/{repo}/releases/{id}/assets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The assets of a release */
        get: operations["listReleaseAssets"];
        put?: never;
        /** Upload an asset (releases:write, org member): multipart/form-data with the file in `attachment`, optional `name` and `label` fields */
        post: operations["uploadReleaseAsset"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/repos/{org}/{repo}/releases/{id}/assets/{asset_id}/download": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Download an asset: the bytes (a single `Range` is honoured: 206), or 302 to a presigned URL valid 5 minutes when TRIAD_S3_REDIRECT_DOWNLOADS is on; counts the download */
        get: operations["downloadReleaseAsset"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/repos/{org}/{repo}/archive/{rev}.tar.gz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Source archive (tar.gz) of a commit, branch, bookmark or tag, streamed from the VCS */
        get: operations["getTarArchive"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        Error: {
            error: {
                /**
                 * @description lowercase snake_case error identifier
                 * @enum {string}
                 */
                code: "bad_request" | "validation_failed" | "unauthorized" | "forbidden" | "not_found" | "method_not_allowed" | "conflict" | "merge_conflict" | "head_moved" | "target_moved" | "not_open" | "not_fast_forward" | "checks_pending" | "checks_failed" | "payload_too_large" | "unsupported_media_type" | "range_not_satisfiable" | "unprocessable" | "limit_exceeded" | "rate_limited" | "service_unavailable" | "storage_unavailable" | "internal";
                /** @description human-readable explanation */
                message: string;
                /** @description `merge_conflict` only: the paths that conflict */
                conflicted_files?: string[];
            };
        };
        Pagination: {
            page: number;
            per_page: number;
            total: number;
        };
        Release: {
            id: number;
            tag_name: string;
            target_commitish: string;
            name: string;
            body: string;
            draft: boolean;
            prerelease: boolean;
            /** @description null when the author no longer exists */
            author: components["schemas"]["ReleasePerson"] | null;
            /** Format: date-time */
            created_at: string;
            /** @description null for a draft */
            published_at: string | null;
            tarball_url: string;
            zipball_url: string;
            assets: components["schemas"]["ReleaseAsset"][];
        };
        ReleaseAsset: {
            id: number;
            name: string;
            label: string;
            size: number;
            content_type: string;
            /** @description `sha256:<hex>` of the bytes */
            digest: string;
            download_count: number;
            /** Format: date-time */
            created_at: string;
            /** @description null when the uploader no longer exists */
            uploader: components["schemas"]["ReleasePerson"] | null;
            browser_download_url: string;
        };
        ReleasePerson: {
            id: number;
            username: string;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: {
        /** @description the request id (echoed from the request when given, else generated) */
        "X-Request-Id": string;
        /** @description the API variant the request was answered in */
        "X-Svc-Api-Variant": "current" | "earlier";
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    listReleases: {
        parameters: {
            query?: {
                page?: number;
                per_page?: number;
            };
            header?: never;
            path: {
                org: string;
                repo: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description releases with their assets */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description RFC 8288 links to the first, prev, next and last pages */
                    Link: string;
                    /** @description number of items in the whole list */
                    "X-Total-Count": number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Release"][];
                        pagination: components["schemas"]["Pagination"];
                    };
                };
            };
            /** @description invalid query parameter (`validation_failed`); or an unknown `X-Svc-Api-Variant` (`bad_request`) */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the token sent is malformed, unknown or expired (a public route needs none) (`unauthorized`) */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description `Bearer realm="triad"` challenge (RFC 6750) */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a private repository and the token lacks releases:read or does not reach it */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description nothing of that name exists, or the caller may not see it (`not_found`) */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description too many requests: retry after `Retry-After` seconds */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After": number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the repository's storage node cannot be reached (`storage_unavailable`, with `Retry-After`) */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createRelease: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                org: string;
                repo: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    tag_name: string;
                    /** @description commit, branch or bookmark where `tag_name` is created when it does not exist */
                    target_commitish?: string;
                    name?: string;
                    body?: string;
                    draft?: boolean;
                    prerelease?: boolean;
                };
            };
        };
        responses: {
            /** @description the release */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description URL of the created resource */
                    Location: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Release"];
                    };
                };
            };
            /** @description malformed JSON (`bad_request`) or a body that fails validation (`validation_failed`); or an unknown `X-Svc-Api-Variant` (`bad_request`) */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description token missing, malformed, unknown or expired (`unauthorized`) */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description `Bearer realm="triad"` challenge (RFC 6750) */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the token lacks releases:write or does not reach the repository, or the caller is no org member */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description nothing of that name exists, or the caller may not see it (`not_found`) */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the tag has a release already */
            409: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description request body too large (`payload_too_large`) */
            413: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a body that is not `application/json`, or whose encoding or charset is not supported (`unsupported_media_type`) */
            415: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `tag_name` names no tag and no `target_commitish` was given, `target_commitish` names nothing, or the VCS refuses the tag name */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description too many requests: retry after `Retry-After` seconds */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After": number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the repository stayed busy (push lock); or the repository's storage node cannot be reached (`storage_unavailable`, with `Retry-After`) */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listReleaseAssets: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                org: string;
                repo: string;
                id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the assets, oldest first */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["ReleaseAsset"][];
                    };
                };
            };
            /** @description an unknown `X-Svc-Api-Variant` (`bad_request`) */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the token sent is malformed, unknown or expired (a public route needs none) (`unauthorized`) */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description `Bearer realm="triad"` challenge (RFC 6750) */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a private repository and the token lacks releases:read or does not reach it */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description nothing of that name exists, or the caller may not see it (`not_found`) */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description too many requests: retry after `Retry-After` seconds */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After": number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the repository's storage node cannot be reached (`storage_unavailable`, with `Retry-After`) */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    uploadReleaseAsset: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                org: string;
                repo: string;
                id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "multipart/form-data": {
                    /**
                     * Format: binary
                     * @description the file (its part file name names the asset)
                     */
                    attachment: Blob;
                    /** @description the asset name (default: the file name), trimmed; no control characters or slashes */
                    name?: string;
                    /** @description a label shown instead of the name; line breaks and tabs allowed */
                    label?: string;
                };
            };
        };
        responses: {
            /** @description the asset */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description URL of the created resource */
                    Location: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["ReleaseAsset"];
                    };
                };
            };
            /** @description a broken or stalled multipart body, no file in `attachment`, a second file, a bad name or label, a file part Content-Type over 255 characters or not printable ASCII */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description token missing, malformed, unknown or expired (`unauthorized`) */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description `Bearer realm="triad"` challenge (RFC 6750) */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the token lacks releases:write or does not reach the repository, or the caller is no org member */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such repository or release (also one deleted while the body streamed) */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the release has an asset of that name */
            409: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the file is larger than TRIAD_ASSET_MAX_BYTES */
            413: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not multipart/form-data */
            415: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description too many requests: retry after `Retry-After` seconds */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After": number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the blob store failed or cannot be reached (`storage_unavailable`), or the stored file was removed before the upload finished; or the repository's storage node cannot be reached (`storage_unavailable`, with `Retry-After`) */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    downloadReleaseAsset: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                org: string;
                repo: string;
                id: number;
                asset_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the bytes (the asset record keeps the uploaded content type) */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/octet-stream": Blob;
                };
            };
            /** @description one byte range, for a single satisfiable `Range: bytes=...` */
            206: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description `bytes start-end/size` */
                    "Content-Range": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/octet-stream": Blob;
                };
            };
            /** @description with TRIAD_S3_REDIRECT_DOWNLOADS=true: to a presigned S3 URL valid 5 minutes */
            302: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description where the bytes are */
                    Location: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description an unknown `X-Svc-Api-Variant` (`bad_request`) */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the token sent is malformed, unknown or expired (a public route needs none) (`unauthorized`) */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description `Bearer realm="triad"` challenge (RFC 6750) */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a private repository and the token lacks releases:read or does not reach it */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such repository, release or asset */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a single `Range` whose first byte is past the end of the asset (`Content-Range: bytes *\/size`) */
            416: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description `bytes *\/size`: the size of the whole */
                    "Content-Range": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description too many requests: retry after `Retry-After` seconds */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After": number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the blob store failed or cannot be reached (`storage_unavailable`); or the repository's storage node cannot be reached (`storage_unavailable`, with `Retry-After`) */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getTarArchive: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                org: string;
                repo: string;
                rev: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the archive */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description a strong validator: the commit `rev` resolves to, the format and the folder name inside the archive */
                    ETag: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/gzip": Blob;
                };
            };
            /** @description `If-None-Match` lists the current `ETag`: the copy the client has is current (no body) */
            304: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description a strong validator: the commit `rev` resolves to, the format and the folder name inside the archive */
                    ETag: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description an unknown `X-Svc-Api-Variant` (`bad_request`) */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the token sent is malformed, unknown or expired (a public route needs none) (`unauthorized`) */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description `Bearer realm="triad"` challenge (RFC 6750) */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a private repository and the token lacks repo:read */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such repository or revision */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description too many requests: retry after `Retry-After` seconds */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After": number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description too many archives, clones and pushes at once (`service_unavailable`, with `Retry-After`); or the repository's storage node cannot be reached (`storage_unavailable`, with `Retry-After`) */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    "X-Svc-Api-Variant": components["headers"]["X-Svc-Api-Variant"];
                    /** @description seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
}
