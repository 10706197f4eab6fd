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
