{{/*
Pod templates (agent.podTemplate, agent.steps.podTemplate): {metadata: {labels, annotations}, spec}.
The spec is a patch merged like Kubernetes' strategic merge patch merges pod specs: maps merge key
by key, lists of named things merge item by item (containers, initContainers, volumes,
imagePullSecrets, env by name; volumeMounts by mountPath; ports by containerPort;
topologySpreadConstraints by topologyKey; hostAliases by ip), every other list replaces.
(agent/executors/pod-template.ts does the same for step pods and the operator's agent pods.)
*/}}

{{/* Merge keys of pod spec lists. */}}
{{- define "triad.mergeKeys" -}}
{{- toJson (dict "containers" "name" "initContainers" "name" "ephemeralContainers" "name" "volumes" "name" "imagePullSecrets" "name" "env" "name" "volumeMounts" "mountPath" "volumeDevices" "devicePath" "ports" "containerPort" "topologySpreadConstraints" "topologyKey" "hostAliases" "ip" "resourceClaims" "name" "schedulingGates" "name") -}}
{{- end }}

{{/* (dict "base" b "patch" p) -> JSON {"v": merged}. */}}
{{- define "triad.smerge" -}}
{{- $b := .base -}}
{{- $p := .patch -}}
{{- if kindIs "map" $p -}}
{{- $out := dict -}}
{{- if kindIs "map" $b }}{{ $out = deepCopy $b }}{{ end -}}
{{- $keys := include "triad.mergeKeys" . | fromJson -}}
{{- range $k, $v := $p -}}
{{- $cur := get $out $k -}}
{{- if kindIs "invalid" $v -}}
{{- $_ := unset $out $k -}}
{{- else if and (hasKey $keys $k) (kindIs "slice" $v) (kindIs "slice" $cur) -}}
{{- $_ := set $out $k (include "triad.smergeList" (dict "base" $cur "patch" $v "key" (get $keys $k)) | fromJson).v -}}
{{- else -}}
{{- $_ := set $out $k (include "triad.smerge" (dict "base" $cur "patch" $v) | fromJson).v -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "v" $out) -}}
{{- else -}}
{{- toJson (dict "v" $p) -}}
{{- end -}}
{{- end }}

{{/* (dict "base" list "patch" list "key" k) -> JSON {"v": merged list}. */}}
{{- define "triad.smergeList" -}}
{{- $key := .key -}}
{{- $out := .base -}}
{{- range $item := .patch -}}
{{- $found := false -}}
{{- $next := list -}}
{{- range $o := $out -}}
{{- if and (not $found) (kindIs "map" $o) (kindIs "map" $item) (hasKey $item $key) (hasKey $o $key) (eq (toString (get $o $key)) (toString (get $item $key))) -}}
{{- $next = append $next (include "triad.smerge" (dict "base" $o "patch" $item) | fromJson).v -}}
{{- $found = true -}}
{{- else -}}
{{- $next = append $next $o -}}
{{- end -}}
{{- end -}}
{{- if not $found }}{{ $next = append $next $item }}{{ end -}}
{{- $out = $next -}}
{{- end -}}
{{- toJson (dict "v" $out) -}}
{{- end }}

{{/* Image pull secret names from a list of {name} objects or (older values) plain names. */}}
{{- define "triad.pullSecretNames" -}}
{{- $names := list -}}
{{- range . -}}
{{- if kindIs "string" . }}{{ $names = append $names . }}{{ else }}{{ $names = append $names .name }}{{ end -}}
{{- end -}}
{{- join "," $names -}}
{{- end }}

{{/* A pod template with image pull secrets ({name} objects or names) merged before it: (dict "t" template "secrets" list) -> JSON {"v": template}. */}}
{{- define "triad.withPullSecrets" -}}
{{- $objs := list -}}
{{- range .secrets -}}
{{- if kindIs "string" . }}{{ $objs = append $objs (dict "name" .) }}{{ else }}{{ $objs = append $objs (dict "name" .name) }}{{ end -}}
{{- end -}}
{{- $base := dict -}}
{{- if $objs }}{{ $base = dict "spec" (dict "imagePullSecrets" $objs) }}{{ end -}}
{{- include "triad.smerge" (dict "base" $base "patch" (.t | default dict)) -}}
{{- end }}

{{/* Refuses what a pod template cannot set: (dict "what" "agent.podTemplate" "t" template "kind" "agent"|"step"). */}}
{{- define "triad.checkPodTemplate" -}}
{{- $what := .what -}}
{{- $t := .t | default dict -}}
{{- range $k, $_ := ($t.metadata | default dict) -}}
{{- if not (has $k (list "labels" "annotations")) -}}
{{- fail (printf "%s.metadata.%s cannot be set: only labels and annotations" $what $k) -}}
{{- end -}}
{{- end -}}
{{- range $k, $_ := (($t.metadata | default dict).labels | default dict) -}}
{{- if or (eq $k "app.kubernetes.io/managed-by") (hasPrefix "triad.dev/" $k) -}}
{{- fail (printf "%s.metadata.labels cannot set %s: it selects the %s pods" $what $k $.kind) -}}
{{- end -}}
{{- end -}}
{{- $spec := $t.spec | default dict -}}
{{- if eq .kind "step" -}}
{{- if hasKey $spec "restartPolicy" -}}
{{- fail (printf "%s.spec cannot set restartPolicy: the executor runs each step once (Never)" $what) -}}
{{- end -}}
{{- range ($spec.containers | default list) -}}
{{- if ne .name "step" -}}
{{- fail (printf "%s.spec.containers can only patch the step container (name: step): a step pod ends when its containers end" $what) -}}
{{- end -}}
{{- if or (hasKey . "command") (hasKey . "args") (hasKey . "image") (hasKey . "workingDir") -}}
{{- fail (printf "%s.spec cannot set the step container's image, command, args or workingDir: the executor runs the pipeline's step" $what) -}}
{{- end -}}
{{- end -}}
{{- range ($spec.initContainers | default list) -}}
{{- if eq .name "clone" -}}
{{- fail (printf "%s.spec cannot change the clone init container: the executor clones the repository" $what) -}}
{{- end -}}
{{- end -}}
{{- range ($spec.volumes | default list) -}}
{{- if eq .name "workspace" -}}
{{- fail (printf "%s.spec cannot change the workspace volume: the executor owns the workspace" $what) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- if hasKey $spec "serviceAccountName" -}}
{{- fail (printf "%s.spec cannot set serviceAccountName: the chart binds the agents to their own service account (agent-rbac.yaml)" $what) -}}
{{- end -}}
{{- range ($spec.containers | default list) -}}
{{- if eq .name "agent" -}}
{{- if or (hasKey . "command") (hasKey . "args") (hasKey . "image") -}}
{{- fail (printf "%s.spec cannot set the agent container's image, command or args: the chart runs `triad agent` from image.*" $what) -}}
{{- end -}}
{{- range (.env | default list) -}}
{{- if or (hasPrefix "TRIAD_" .name) (eq .name "POD_NAME") (eq .name "POD_NAMESPACE") -}}
{{- fail (printf "%s.spec cannot set %s in the agent container: the chart sets it from agent.* values (use agent.extraEnv for others)" $what .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}
