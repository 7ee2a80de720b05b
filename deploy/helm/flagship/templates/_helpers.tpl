{{/* Names and labels shared by every resource of the chart. */}}
{{- define "flagship.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "flagship.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "flagship.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "flagship.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector of one role's pods: call with (dict "root" $ "role" "data"). */}}
{{- define "flagship.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flagship.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "flagship.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flagship.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "flagship.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret holding the backend URLs and the signing key: the user's, or the chart's. */}}
{{- define "flagship.backendsSecret" -}}
{{- if .Values.backends.existingSecret -}}
{{- .Values.backends.existingSecret -}}
{{- else -}}
{{- printf "%s-backends" (include "flagship.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Fails the render, naming the value, when a backend is missing: the chart runs none of its own. */}}
{{- define "flagship.requireBackends" -}}
{{- if not .Values.backends.existingSecret -}}
{{- $_ := required "backends.databaseUrl is required (your Postgres), or set backends.existingSecret" .Values.backends.databaseUrl -}}
{{- $_ := required "backends.redisUrl is required (your Redis), or set backends.existingSecret" .Values.backends.redisUrl -}}
{{- $_ := required "backends.clickhouseUrl is required (your ClickHouse), or set backends.existingSecret" .Values.backends.clickhouseUrl -}}
{{- $_ := required "jwtPrivateKey is required (openssl genpkey -algorithm ed25519), or set backends.existingSecret" .Values.jwtPrivateKey -}}
{{- end -}}
{{- $_ := required "backends.temporalAddress is required (host:port of your Temporal frontend)" .Values.backends.temporalAddress -}}
{{- end -}}

{{/* Environment every process reads (api/config.ts), besides ROLES. */}}
{{- define "flagship.envFrom" -}}
- configMapRef:
    name: {{ include "flagship.fullname" . }}-env
- secretRef:
    name: {{ include "flagship.backendsSecret" . }}
{{- with .Values.extraEnvFrom }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The one writable place of a read-only root filesystem: DATA_DIR and Node's temporary files. */}}
{{- define "flagship.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* The ConfigMap's data: every non-secret variable (api/config.ts), shared by the app and the migration Job. */}}
{{- define "flagship.envData" -}}
NODE_ENV: production
HOST: 0.0.0.0
PORT: {{ .Values.ports.control | quote }}
DATA_PORT: {{ .Values.ports.data | quote }}
INGEST_PORT: {{ .Values.ports.ingest | quote }}
MANAGEMENT_PORT: {{ .Values.ports.management | quote }}
FLAGD_ENABLED: {{ .Values.flagd.enabled | quote }}
FLAGD_PORT: {{ .Values.ports.flagd | quote }}
FLAGD_SYNC_PORT: {{ .Values.ports.flagdSync | quote }}
CLICKHOUSE_DATABASE: {{ .Values.backends.clickhouseDatabase | quote }}
{{- with .Values.backends.clickhouseCluster }}
CLICKHOUSE_CLUSTER: {{ . | quote }}
{{- end }}
TEMPORAL_ADDRESS: {{ .Values.backends.temporalAddress | quote }}
TEMPORAL_NAMESPACE: {{ .Values.backends.temporalNamespace | quote }}
TEMPORAL_TASK_QUEUE: {{ .Values.backends.temporalTaskQueue | quote }}
{{- with .Values.publicBaseUrl }}
PUBLIC_BASE_URL: {{ . | quote }}
{{- end }}
LOG_LEVEL: {{ .Values.logLevel | quote }}
TRUST_PROXY: {{ .Values.trustProxy | quote }}
DATA_DIR: /tmp/flags-data
{{- range $name, $value := .Values.env }}
{{ $name }}: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* The chart-managed Secret's data: backend URLs and the signing key. */}}
{{- define "flagship.secretData" -}}
DATABASE_URL: {{ .Values.backends.databaseUrl | quote }}
{{- with .Values.backends.databaseReadUrl }}
DATABASE_READ_URL: {{ . | quote }}
{{- end }}
REDIS_URL: {{ .Values.backends.redisUrl | quote }}
CLICKHOUSE_URL: {{ .Values.backends.clickhouseUrl | quote }}
JWT_PRIVATE_KEY: {{ .Values.jwtPrivateKey | quote }}
{{- end -}}
