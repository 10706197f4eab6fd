{{/*
The database pool variables of a process on the external PostgreSQL (docs/operations.md,
"PostgreSQL behind a pooler"): DATABASE_POOL_MODE, TRIAD_DB_POOL_MAX, and DATABASE_DIRECT_URL
from the credential databaseDirectUrl (database.directUrl in the chart's Secret,
secrets.existingSecrets.databaseDirectUrl, or an optional key of secrets.existingSecret).
Call with (dict "root" $); the migration hook passes "secret": its own hook Secret, which holds
database.directUrl when the chart's Secret does not exist yet.
*/}}
{{- define "triad.databasePoolEnv" -}}
{{- $db := .root.Values.database -}}
{{- $mode := $db.poolMode | default "session" -}}
{{- $cred := list .root "databaseDirectUrl" -}}
{{- $given := include "triad.credentialGiven" $cred -}}
{{- if and (eq $mode "transaction") (not $given) -}}
{{- fail "database.poolMode=transaction needs database.directUrl: a direct PostgreSQL URL (LISTEN/NOTIFY, the migration lock, the push locks), or secrets.existingSecrets.databaseDirectUrl, or secrets.existingSecret with a database-direct-url key" -}}
{{- end }}
- name: DATABASE_POOL_MODE
  value: {{ $mode | quote }}
- name: TRIAD_DB_POOL_MAX
  value: {{ $db.poolMax | default 20 | quote }}
{{- if $given }}
{{- $own := include "triad.credentialOwn" $cred | fromYaml }}
- name: DATABASE_DIRECT_URL
  valueFrom:
    secretKeyRef:
      {{- if and .secret (not $own.name) }}
      name: {{ .secret | quote }}
      key: database-direct-url
      {{- else }}
      {{- include "triad.secretRef" $cred | replace ", " "\n" | nindent 6 }}
      {{- end }}
      optional: {{ not (include "triad.credentialExplicit" $cred) }}
{{- end }}
{{- end -}}
