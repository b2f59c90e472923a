{{/* The labels of every object of a role: `role` is gateway, worker, worker-store or search. */}}
{{- define "switchboard.labels" -}}
app.kubernetes.io/name: switchboard
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
app.kubernetes.io/part-of: switchboard
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{/* What selects a role's pods (never changes across upgrades). */}}
{{- define "switchboard.selector" -}}
app.kubernetes.io/name: switchboard
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{/* An object's name: the release, then the role. */}}
{{- define "switchboard.name" -}}
{{ printf "%s-%s" .root.Release.Name .role | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "switchboard.image" -}}
{{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The environment every process shares; `user` is its NATS user. */}}
{{- define "switchboard.env" -}}
- {name: SWITCHBOARD_CONFIG, value: /etc/switchboard/switchboard.toml}
- {name: SWITCHBOARD_NATS_URL, value: {{ .root.Values.nats.url | quote }}}
- {name: SWITCHBOARD_REPLICAS, value: {{ .root.Values.nats.replicas | quote }}}
- {name: SWITCHBOARD_METRICS_LISTEN, value: "0.0.0.0:9090"}
- {name: SWITCHBOARD_LOG_FORMAT, value: json}
- {name: SWITCHBOARD_NATS_USER, value: {{ .user | quote }}}
- {name: SWITCHBOARD_NATS_PASSWORD_FILE, value: /run/secrets/switchboard/nats-password}
{{- if .root.Values.nats.tls.enabled }}
- {name: SWITCHBOARD_NATS_CA, value: /run/secrets/nats-tls/ca.pem}
- {name: SWITCHBOARD_NATS_CERT, value: /run/secrets/nats-tls/cert.pem}
- {name: SWITCHBOARD_NATS_KEY, value: /run/secrets/nats-tls/key.pem}
{{- end }}
{{- if and (eq .root.Values.store.kind "scylla") .root.Values.store.scylla.username }}
- {name: SWITCHBOARD_SCYLLA_PASSWORD_FILE, value: /run/secrets/switchboard/scylla-password}
{{- end }}
{{- if eq .root.Values.blobs.backend "s3" }}
- {name: AWS_ACCESS_KEY_ID_FILE, value: /run/secrets/switchboard/aws-access-key-id}
- {name: AWS_SECRET_ACCESS_KEY_FILE, value: /run/secrets/switchboard/aws-secret-access-key}
{{- end }}
{{- end }}

{{/* The Secret's keys a role's pods mount: its own NATS password and the
shared secrets, each only if it is used. */}}
{{- define "switchboard.secretItems" -}}
- {key: {{ printf "nats-%s-password" .user }}, path: nats-password}
{{- if and (eq .root.Values.store.kind "scylla") .root.Values.store.scylla.username }}
- {key: scylla-password, path: scylla-password}
{{- end }}
{{- if eq .root.Values.blobs.backend "s3" }}
- {key: aws-access-key-id, path: aws-access-key-id}
- {key: aws-secret-access-key, path: aws-secret-access-key}
{{- end }}
{{- end }}

{{/* Volumes every pod has: the configuration, its secrets, NATS TLS. */}}
{{- define "switchboard.volumes" -}}
- name: config
  configMap: {name: {{ include "switchboard.name" (dict "root" .root "role" "config") }}}
- name: secrets
  secret:
    secretName: {{ .root.Values.secret.name }}
    items:
      {{- include "switchboard.secretItems" . | nindent 6 }}
{{- if .root.Values.nats.tls.enabled }}
- name: nats-tls
  secret: {secretName: {{ .root.Values.nats.tls.secretName }}}
{{- end }}
{{- end }}

{{- define "switchboard.mounts" -}}
- {name: config, mountPath: /etc/switchboard, readOnly: true}
- {name: secrets, mountPath: /run/secrets/switchboard, readOnly: true}
{{- if .Values.nats.tls.enabled }}
- {name: nats-tls, mountPath: /run/secrets/nats-tls, readOnly: true}
{{- end }}
{{- end }}

{{/* The pod's security: non-root, no privilege, a read-only root. */}}
{{- define "switchboard.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end }}

{{- define "switchboard.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end }}

{{/* Probes on a port: /readyz and /healthz. */}}
{{- define "switchboard.probes" -}}
readinessProbe:
  httpGet: {path: /readyz, port: {{ .port }}}
  periodSeconds: {{ .root.Values.probes.readiness.periodSeconds }}
  failureThreshold: {{ .root.Values.probes.readiness.failureThreshold }}
livenessProbe:
  httpGet: {path: /healthz, port: {{ .port }}}
  periodSeconds: {{ .root.Values.probes.liveness.periodSeconds }}
  failureThreshold: {{ .root.Values.probes.liveness.failureThreshold }}
{{- end }}

{{/* The store flag of a role that does not hold the embedded store. */}}
{{- define "switchboard.remoteStore" -}}
{{- if eq .Values.store.kind "scylla" }}scylla{{ else }}nats{{ end }}
{{- end }}
