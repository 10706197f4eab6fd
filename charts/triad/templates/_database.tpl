{{/*
The database pool variables of a process on the external PostgreSQL (docs/operations.md,
"PostgreSQL behind a pooler"): DATABASE_POOL_MODE, TRIAD_DB_POOL_MAX, and DATABASE_DIRECT_URL
from the key database-direct-url of `secret` (with database.directUrl, or optional in
secrets.existingSecret). Call with (dict "root" $ "secret" <the Secret holding database-url>).
*/}}
{{- define "triad.databasePoolEnv" -}}
{{- $db := .root.Values.database -}}
{{- $mode := $db.poolMode | default "session" -}}
{{- if and (eq $mode "transaction") (not $db.directUrl) (not .root.Values.secrets.existingSecret) -}}
{{- fail "database.poolMode=transaction needs database.directUrl: a direct PostgreSQL URL (LISTEN/NOTIFY, the migration lock, the push locks), or secrets.existingSecret with a database-direct-url key" -}}
{{- end }}
- name: DATABASE_POOL_MODE
  value: {{ $mode | quote }}
- name: TRIAD_DB_POOL_MAX
  value: {{ $db.poolMax | default 20 | quote }}
{{- if or $db.directUrl .root.Values.secrets.existingSecret }}
- name: DATABASE_DIRECT_URL
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: database-direct-url
      optional: {{ not $db.directUrl }}
{{- end }}
{{- end -}}
