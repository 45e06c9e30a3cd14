{{/* The labels of a component (node or leader). */}}
{{- define "ovnedge.labels" -}}
{app.kubernetes.io/name: ovnedge, app.kubernetes.io/component: {{ . }}}
{{- end }}

{{/* The image of the workloads and of the lb-svc Deployments. */}}
{{- define "ovnedge.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The leader's /metrics port: metricsPort, or
on the host network (leader.hostNetwork) leader.hostNetworkMetricsPort,
since every node's DaemonSet pod holds metricsPort there (a hostNetwork
pod's containerPort is a host port: the scheduler would never place the
leader next to a node pod). */}}
{{- define "ovnedge.leaderMetricsPort" -}}
{{ if .Values.leader.hostNetwork }}{{ .Values.leader.hostNetworkMetricsPort }}{{ else }}{{ .Values.metricsPort }}{{ end }}
{{- end }}

{{/* The /healthz and /readyz port of the node (healthPort) and of the
leader (healthPort, or leader.hostNetworkHealthPort on the host network,
as its metrics port). The defaults serve releases upgraded with
--reuse-values from a chart without these values. */}}
{{- define "ovnedge.nodeHealthPort" -}}
{{ .Values.healthPort | default 9475 }}
{{- end }}
{{- define "ovnedge.leaderHealthPort" -}}
{{ if .Values.leader.hostNetwork }}{{ .Values.leader.hostNetworkHealthPort | default 9474 }}{{ else }}{{ include "ovnedge.nodeHealthPort" . }}{{ end }}
{{- end }}

{{/* "true" when /metrics is served over HTTPS to the clients the API
server authenticates and authorizes (metrics.secure, true when unset). */}}
{{- define "ovnedge.metricsSecure" -}}
{{ dig "secure" true (.Values.metrics | default dict) }}
{{- end }}

{{/* The Secret of the metrics' certificate (metrics.tlsSecret; empty:
a self-signed one). */}}
{{- define "ovnedge.metricsTLSSecret" -}}
{{ dig "tlsSecret" "" (.Values.metrics | default dict) }}
{{- end }}

{{/* Flags node and leader share: the networks, the metrics and health
addresses (of the ports given: dict "Values" .Values "metricsPort" PORT
"healthPort" PORT) and the metrics' TLS and authorization,
the EgressIP health check and heartbeat (node and leader must agree), the
LB pools (the node's BGP communities are per pool), TLS. */}}
{{- define "ovnedge.commonArgs" -}}
- --cluster-subnets={{ .Values.clusterSubnets }}
- --gateway-v4-join-subnet={{ .Values.joinSubnet }}
- --gateway-v6-join-subnet={{ .Values.joinSubnetV6 }}
- --gateway-v4-masquerade-subnet={{ .Values.masqueradeSubnetV4 }}
- --gateway-v6-masquerade-subnet={{ .Values.masqueradeSubnetV6 }}
- --metrics-address=:{{ .metricsPort }}
- --health-address=:{{ .healthPort }}
{{- if eq (include "ovnedge.metricsSecure" .) "true" }}
- --metrics-secure
{{- if include "ovnedge.metricsTLSSecret" . }}
- --metrics-cert-file=/etc/ovnedge/metrics-tls/tls.crt
- --metrics-key-file=/etc/ovnedge/metrics-tls/tls.key
{{- end }}
{{- end }}
- --log-level={{ .Values.logLevel }}
- --kube-api-qps={{ .Values.kubeAPI.qps }}
- --kube-api-burst={{ .Values.kubeAPI.burst }}
- --enable-egress-ip={{ .Values.egress.enabled }}
- --egressip-node-healthcheck-port={{ .Values.egress.healthCheckPort }}
- --egressip-heartbeat-port={{ .Values.egress.heartbeatPort }}
{{- if .Values.egress.services }}
- --enable-egress-service
{{- end }}
{{- if .Values.egress.fastFailover }}
- --egressip-fast-failover
{{- else }}
# opt-in sub-second failover (egress.fastFailover, both):
# - --egressip-fast-failover
{{- end }}
{{- if .Values.egress.heartbeatKeySecret }}
- --egressip-heartbeat-key-file=/etc/ovnedge/heartbeat/key
{{- end }}
{{- with .Values.loadBalancer.pools }}
- --lb-pools={{ range $i, $name := keys . | sortAlpha }}{{ if $i }},{{ end }}{{ $name }}={{ index $.Values.loadBalancer.pools $name }}{{ end }}
{{- end }}
{{- with .Values.loadBalancer.class }}
- --lb-class={{ . }}
{{- end }}
{{- if .Values.ovn.tlsSecret }}
- --nb-client-cert=/etc/ovnedge/ovn-tls/tls.crt
- --nb-client-privkey=/etc/ovnedge/ovn-tls/tls.key
- --nb-client-cacert=/etc/ovnedge/ovn-tls/ca.crt
{{- end }}
{{- end }}

{{/* The probes of both, on the health port given (plain HTTP: /healthz
and /readyz alone). */}}
{{- define "ovnedge.probes" -}}
readinessProbe:
  httpGet: {path: /readyz, port: {{ . }}}
  # /readyz is the instance's own state, cheap to ask: ready within a few
  # seconds of the first reconcile, not up to the default 10 s
  periodSeconds: 3
livenessProbe:
  httpGet: {path: /healthz, port: {{ . }}}
{{- end }}
