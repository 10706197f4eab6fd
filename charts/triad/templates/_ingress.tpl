{{/* What the Ingress, the HTTPRoute, the trusted proxy and the termination grace derive from. */}}

{{/* The transport timeout in seconds: TRIAD_TRANSPORT_TIMEOUT_SECONDS of backends.env, else the server's default (600). */}}
{{- define "triad.transportTimeoutSeconds" -}}
{{- $t := 600 -}}
{{- range .Values.backends.env -}}
{{- if and (eq .name "TRIAD_TRANSPORT_TIMEOUT_SECONDS") .value -}}
{{- $t = .value | float64 | ceil | int -}}
{{- end -}}
{{- end -}}
{{- $t -}}
{{- end -}}

{{/* What a proxy waits for the server: the transport timeout + 60 s, so that the server's own 504 arrives first. */}}
{{- define "triad.proxyTimeoutSeconds" -}}
{{- add (include "triad.transportTimeoutSeconds" . | int) 60 -}}
{{- end -}}

{{/* The server pods' terminationGracePeriodSeconds: the value, else preStop + transport timeout + 15. */}}
{{- define "triad.serverGrace" -}}
{{- if kindIs "invalid" .Values.server.terminationGracePeriodSeconds -}}
{{- add (int .Values.server.preStopSeconds) (include "triad.transportTimeoutSeconds" . | int) 15 -}}
{{- else -}}
{{- int .Values.server.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/* The server's TRIAD_SHUTDOWN_TIMEOUT_SECONDS: the grace minus the preStop delay minus 5 (at least 1). */}}
{{- define "triad.serverShutdownSeconds" -}}
{{- max 1 (sub (sub (include "triad.serverGrace" . | int) (int .Values.server.preStopSeconds)) 5) -}}
{{- end -}}

{{/* The storage nodes' terminationGracePeriodSeconds: the value, else transport timeout + 15. */}}
{{- define "triad.storageGrace" -}}
{{- if kindIs "invalid" .Values.storage.nodes.terminationGracePeriodSeconds -}}
{{- add (include "triad.transportTimeoutSeconds" . | int) 15 -}}
{{- else -}}
{{- int .Values.storage.nodes.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/* TRIAD_TRUST_PROXY as the chart sets it ("" = not set): server.trustProxy, else 1 behind the Ingress or HTTPRoute. */}}
{{- define "triad.trustProxy" -}}
{{- if not (kindIs "invalid" .Values.server.trustProxy) -}}
{{- .Values.server.trustProxy -}}
{{- else if or .Values.ingress.enabled .Values.httpRoute.enabled -}}
1
{{- end -}}
{{- end -}}

{{/* "true" when the server trusts any peer as a proxy (a hop count or true): direct peers could then forge X-Forwarded-For. */}}
{{- define "triad.trustsAnyPeer" -}}
{{- $t := include "triad.trustProxy" . | lower -}}
{{- if or (eq $t "true") (and (regexMatch "^[0-9]+$" $t) (ne (int $t) 0)) -}}
true
{{- end -}}
{{- end -}}

{{/* Whether the ingress-nginx annotations apply: ingress.nginx, else className "nginx". */}}
{{- define "triad.ingressNginx" -}}
{{- if kindIs "invalid" .Values.ingress.nginx -}}
{{- if eq .Values.ingress.className "nginx" }}true{{ end -}}
{{- else if .Values.ingress.nginx -}}
true
{{- end -}}
{{- end -}}

{{/* The Ingress's annotations: the ingress-nginx defaults for transfers, then ingress.annotations (which win). */}}
{{- define "triad.ingressAnnotations" -}}
{{- $a := dict -}}
{{- if include "triad.ingressNginx" . -}}
{{- $timeout := include "triad.proxyTimeoutSeconds" . -}}
{{- $_ := set $a "nginx.ingress.kubernetes.io/proxy-body-size" "0" -}}
{{- $_ := set $a "nginx.ingress.kubernetes.io/proxy-read-timeout" $timeout -}}
{{- $_ := set $a "nginx.ingress.kubernetes.io/proxy-send-timeout" $timeout -}}
{{- $_ := set $a "nginx.ingress.kubernetes.io/proxy-request-buffering" "off" -}}
{{- $_ := set $a "nginx.ingress.kubernetes.io/proxy-buffering" "off" -}}
{{- end -}}
{{- $a = merge (deepCopy (.Values.ingress.annotations | default dict)) $a -}}
{{- if $a }}{{ toYaml $a }}{{ end -}}
{{- end -}}
