{{- /*
Credentials: where each one comes from. Nothing is generated at render time (a random value would
change at every `helm template` or Argo CD render). Each credential is, in this order of precedence:
  1. secrets.existingSecrets.<credential>: {name, key} - a Secret of your own (key: the standard key
     below when empty);
  2. secrets.existingSecret - one Secret of your own holding the standard keys;
  3. the inline value (secrets.agentToken, database.url, ...) - stored in the chart's Secret.
*/}}

{{/* The clone init container's image of step pods: agent.steps.cloneImage, else cloneImage.* */}}
{{- define "triad.cloneImage" -}}
{{- $tag := .Values.cloneImage.tag | default .Values.image.tag | default .Chart.AppVersion -}}
{{- default (printf "%s:%s" .Values.cloneImage.repository $tag) .Values.agent.steps.cloneImage -}}
{{- end -}}

{{/* credential -> the standard key in a Secret */}}
{{- define "triad.credentialKeys" -}}
agentToken: agent-token
adminToken: admin-token
operatorToken: operator-token
storageSecret: storage-secret
databaseUrl: database-url
databaseDirectUrl: database-direct-url
s3AccessKey: s3-access-key
s3SecretKey: s3-secret-key
{{- end -}}

{{/* credential -> the value that holds it inline */}}
{{- define "triad.credentialValues" -}}
agentToken: secrets.agentToken
adminToken: secrets.adminToken
operatorToken: secrets.operatorToken
storageSecret: secrets.storageSecret
databaseUrl: database.url
databaseDirectUrl: database.directUrl
s3AccessKey: s3.accessKey
s3SecretKey: s3.secretKey
{{- end -}}

{{/* The inline value of a credential ("" when not given). Args: list root credential. */}}
{{- define "triad.credentialValue" -}}
{{- $v := (index . 0).Values -}}
{{- $m := dict "agentToken" $v.secrets.agentToken "adminToken" $v.secrets.adminToken "operatorToken" $v.secrets.operatorToken "storageSecret" $v.secrets.storageSecret "databaseUrl" $v.database.url "databaseDirectUrl" $v.database.directUrl "s3AccessKey" $v.s3.accessKey "s3SecretKey" $v.s3.secretKey -}}
{{- index $m (index . 1) | default "" -}}
{{- end -}}

{{/* secrets.existingSecrets.<credential> (a dict, empty when not set). Args: list root credential. */}}
{{- define "triad.credentialOwn" -}}
{{- $all := (index . 0).Values.secrets.existingSecrets | default dict -}}
{{- index $all (index . 1) | default dict | toYaml -}}
{{- end -}}

{{/* "true" when the credential is given inline or by its own existing Secret. Args: list root credential. */}}
{{- define "triad.credentialExplicit" -}}
{{- $own := include "triad.credentialOwn" . | fromYaml -}}
{{- if or $own.name (include "triad.credentialValue" .) }}true{{ end -}}
{{- end -}}

{{/* "true" when the credential is given in any way (secrets.existingSecret included). Args: list root credential. */}}
{{- define "triad.credentialGiven" -}}
{{- if or (include "triad.credentialExplicit" .) (index . 0).Values.secrets.existingSecret }}true{{ end -}}
{{- end -}}

{{/* The body of a secretKeyRef: `name: "...", key: "..."` (use inside { }). Args: list root credential. */}}
{{- define "triad.secretRef" -}}
{{- $root := index . 0 -}}
{{- $std := index (include "triad.credentialKeys" $root | fromYaml) (index . 1) -}}
{{- $own := include "triad.credentialOwn" . | fromYaml -}}
{{- if $own.name -}}
name: {{ $own.name | quote }}, key: {{ $own.key | default $std | quote }}
{{- else -}}
name: {{ include "triad.secretName" $root | quote }}, key: {{ $std | quote }}
{{- end -}}
{{- end -}}

{{/* The credentials this configuration needs (a YAML list). */}}
{{- define "triad.requiredCredentials" -}}
{{- if and .Values.agent.enabled (eq .Values.agent.mode "deployment") }}
- agentToken
{{- end }}
{{- if and .Values.agent.enabled (eq .Values.agent.mode "operator") }}
- operatorToken
{{- end }}
{{- if eq .Values.storage.mode "nodes" }}
- storageSecret
{{- end }}
{{- if .Values.s3.endpoint }}
- s3AccessKey
- s3SecretKey
{{- end }}
{{- end -}}

{{/* Fails naming every required credential that is given nowhere (all of them in one message). */}}
{{- define "triad.validateSecrets" -}}
{{- $paths := include "triad.credentialValues" . | fromYaml -}}
{{- $keys := include "triad.credentialKeys" . | fromYaml -}}
{{- $missing := list -}}
{{- $missingKeys := list -}}
{{- range (include "triad.requiredCredentials" . | fromYamlArray) -}}
{{- if not (include "triad.credentialGiven" (list $ .)) -}}
{{- $missing = append $missing (printf "%s (or secrets.existingSecrets.%s)" (index $paths .) .) -}}
{{- $missingKeys = append $missingKeys (index $keys .) -}}
{{- end -}}
{{- end -}}
{{- if $missing -}}
{{- fail (printf "credentials missing: set %s; or set secrets.existingSecret to a Secret of yours with the keys %s. The chart generates no credentials: a value made at render time would change at every render (helm template, Argo CD). See docs/kubernetes.md, \"Secrets\"." (join ", " $missing) (join ", " $missingKeys)) -}}
{{- end -}}
{{- end -}}
