{{- define "triad.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "triad.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "triad.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "triad.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "triad.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "triad.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "triad.serverSelector" -}}
app.kubernetes.io/name: {{ include "triad.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "triad.agentSelector" -}}
app.kubernetes.io/name: {{ include "triad.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "triad.storageSelector" -}}
app.kubernetes.io/name: {{ include "triad.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: storage
{{- end -}}

{{/* The storage nodes' StatefulSet and headless Service. 52 characters at most: the StatefulSet
controller labels its pods with "<name>-<10-character hash>", which must fit in 63. */}}
{{- define "triad.storageName" -}}
{{- printf "%s-storage" (include "triad.fullname" .) | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* server.replicas, or when it is empty: 1 with storage.mode=local, 2 with nodes. */}}
{{- define "triad.serverReplicas" -}}
{{- if kindIs "invalid" .Values.server.replicas -}}
{{- ternary 2 1 (eq .Values.storage.mode "nodes") -}}
{{- else -}}
{{- int .Values.server.replicas -}}
{{- end -}}
{{- end -}}

{{/* storage.mode=local: the access mode of the repository volume (persistence.accessMode, else
ReadWriteOnce with one server replica and ReadWriteMany with more). */}}
{{- define "triad.reposAccessMode" -}}
{{- default (ternary "ReadWriteOnce" "ReadWriteMany" (le (int (include "triad.serverReplicas" .)) 1)) .Values.persistence.accessMode -}}
{{- end -}}

{{/* Whether a PodDisruptionBudget is rendered: `enabled` when set, else when replicas > 1. Args: list pdb replicas. */}}
{{- define "triad.pdbOn" -}}
{{- $pdb := index . 0 -}}
{{- $replicas := int (index . 1) -}}
{{- if kindIs "invalid" $pdb.enabled -}}
{{- if gt $replicas 1 }}true{{ end -}}
{{- else if $pdb.enabled -}}
true
{{- end -}}
{{- end -}}

{{/* Combinations the chart refuses, checked in one place so that the first message is stable. */}}
{{- define "triad.validate" -}}
{{- $replicas := int (include "triad.serverReplicas" .) -}}
{{- if eq .Values.storage.mode "nodes" -}}
{{- if not (include "triad.credentialGiven" (list . "databaseUrl")) -}}
{{- fail "storage.mode=nodes needs an external PostgreSQL, where the storage nodes register: set database.url (or secrets.existingSecrets.databaseUrl, or secrets.existingSecret with a database-url key)" -}}
{{- end -}}
{{- if not .Values.s3.endpoint -}}
{{- fail "storage.mode=nodes needs an object store: set s3.endpoint (the servers keep no volume for step logs and release assets, and the storage nodes back repositories up there)" -}}
{{- end -}}
{{- else -}}
{{- if and (not (include "triad.credentialGiven" (list . "databaseUrl"))) (gt $replicas 1) -}}
{{- fail "server.replicas > 1 needs an external PostgreSQL: set database.url (or secrets.existingSecrets.databaseUrl, or secrets.existingSecret with database-url)" -}}
{{- end -}}
{{- if and .Values.persistence.enabled (eq (include "triad.reposAccessMode" .) "ReadWriteOncePod") (gt $replicas 1) -}}
{{- fail "persistence.accessMode=ReadWriteOncePod admits a single pod: server.replicas > 1 needs ReadWriteMany (or storage.mode=nodes)" -}}
{{- end -}}
{{- end -}}
{{- include "triad.validateSecrets" . -}}
{{- end -}}

{{/* The object store variables, the same for the servers and the storage nodes. */}}
{{- define "triad.s3Env" -}}
{{- if .Values.s3.endpoint }}
- name: TRIAD_S3_ENDPOINT
  value: {{ .Values.s3.endpoint | quote }}
- name: TRIAD_S3_BUCKET
  value: {{ .Values.s3.bucket | quote }}
- name: TRIAD_S3_REGION
  value: {{ .Values.s3.region | quote }}
- name: TRIAD_S3_USE_SSL
  value: {{ .Values.s3.useSSL | quote }}
- name: TRIAD_S3_REDIRECT_DOWNLOADS
  value: {{ .Values.s3.redirectDownloads | quote }}
- name: TRIAD_S3_ACCESS_KEY
  valueFrom:
    secretKeyRef: { {{ include "triad.secretRef" (list . "s3AccessKey") }} }
- name: TRIAD_S3_SECRET_KEY
  valueFrom:
    secretKeyRef: { {{ include "triad.secretRef" (list . "s3SecretKey") }} }
{{- end }}
{{- end -}}

{{- define "triad.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "triad.secretName" -}}
{{- default (include "triad.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "triad.agentName" -}}
{{- printf "%s-agent" (include "triad.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "triad.stepNamespace" -}}
{{- default (printf "%s-steps" .Release.Namespace | trunc 63 | trimSuffix "-") .Values.agent.steps.namespace -}}
{{- end -}}

{{- define "triad.baseUrl" -}}
{{- if .Values.baseUrl -}}
{{- .Values.baseUrl -}}
{{- else -}}
{{- printf "http://%s.%s.svc.cluster.local:%v" (include "triad.fullname" .) .Release.Namespace .Values.service.port -}}
{{- end -}}
{{- end -}}

{{- define "triad.serverUrl" -}}
{{- printf "http://%s.%s.svc:%v" (include "triad.fullname" .) .Release.Namespace .Values.service.port -}}
{{- end -}}

{{- define "triad.operatorRules" -}}
# What the operator does, and nothing else: it reads and patches pools (finalizer, status), writes
# its objects by server-side apply (create + patch), deletes a pool's step Role in another
# namespace, patches agent pods' deletion cost and deletes leftover step pods and claims. Pods
# (create, watch), pods/log, events (watch) and claims (create) are here because Kubernetes only lets it grant a
# pool's step Role the permissions it holds itself.
- apiGroups: [triad.dev]
  resources: [agentpools]
  verbs: [get, list, watch, patch]
- apiGroups: [triad.dev]
  resources: [agentpools/status]
  verbs: [get, patch]
- apiGroups: [triad.dev]
  resources: [agentpools/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, create, patch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, create, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [""]
  resources: [events]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, create, delete]
# Events on the pools (scaling decisions and failures; repeats patch the count).
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
# the step namespace's NetworkPolicy of a pool (TRIAD_OPERATOR_STEP_POLICY)
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create, patch, delete]
{{- end -}}

{{- /* The namespaces the operator serves in namespaced mode (operator.clusterWide false). */}}
{{- define "triad.operatorWatchNamespace" -}}
{{- default .Release.Namespace .Values.operator.watchNamespace -}}
{{- end -}}

{{- define "triad.operatorStepRules" -}}
# In a step namespace it does not serve, the operator only grants and removes a pool's step Role
# and sweeps leftover step pods and claims: no Secrets, Deployments or pools there. (Pods, pods/log
# and claims are here because Kubernetes only lets it grant what it holds itself.)
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, create, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [""]
  resources: [events]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, create, delete]
# the step namespace's NetworkPolicy of a pool (TRIAD_OPERATOR_STEP_POLICY)
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create, patch, delete]
{{- end -}}

{{- /* TRIAD_OPERATOR_STEP_POLICY: the server pods and DNS as NetworkPolicy peers (JSON). */}}
{{- define "triad.operatorStepPolicy" -}}
{{- $server := dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .Release.Namespace)) "podSelector" (dict "matchLabels" (include "triad.serverSelector" . | fromYaml)) -}}
{{- dict "server" (list $server) "serverPort" (int .Values.server.port) "dns" .Values.agent.steps.networkPolicy.dns | toJson -}}
{{- end -}}
