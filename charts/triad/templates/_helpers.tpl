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
{{- default .Release.Namespace .Values.agent.steps.namespace -}}
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
# (create, watch), pods/log and claims (create) are here because Kubernetes only lets it grant a
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
  resources: [persistentvolumeclaims]
  verbs: [get, list, create, delete]
{{- end -}}
