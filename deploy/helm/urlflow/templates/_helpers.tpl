{{/* The names and labels every object of the chart shares. */}}

{{- define "urlflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "urlflow.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "urlflow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "urlflow.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "urlflow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "urlflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "urlflow.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "urlflow.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The image reference: repository:tag, repository@digest or both. */}}
{{- define "urlflow.image" -}}
{{- $repository := required "image.repository is required: no registry publishes urlflow's image yet; push the one scripts/image builds and name it here" .Values.image.repository }}
{{- if not (or .Values.image.tag .Values.image.digest) }}
{{- fail "image.tag (or image.digest) is required: the version you built with scripts/image VERSION" }}
{{- end }}
{{- $repository }}{{ with .Values.image.tag }}:{{ . }}{{ end }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/*
The Secrets urlflow reads, as a YAML list: each the setting's _FILE variable, the Secret's
name and key, and the file under /run/secrets/urlflow/. Required ones fail by name.
*/}}
{{- define "urlflow.secretFiles" -}}
{{- $s := .Values.secrets }}
- env: URLFLOW_KEYS_FILE
  name: {{ required "secrets.keys.name is required: an existing Secret holding the key ring (urlflow keys generate); the chart never generates it" $s.keys.name | quote }}
  key: {{ $s.keys.key | quote }}
  file: keys
- env: URLFLOW_OIDC_CLIENT_SECRET_FILE
  name: {{ required "secrets.oidcClientSecret.name is required: an existing Secret holding the OIDC client's secret" $s.oidcClientSecret.name | quote }}
  key: {{ $s.oidcClientSecret.key | quote }}
  file: oidc-client-secret
- env: URLFLOW_REDIS_URL_FILE
  name: {{ required "secrets.redisUrl.name is required: an existing Secret holding the whole Redis URL" $s.redisUrl.name | quote }}
  key: {{ $s.redisUrl.key | quote }}
  file: redis-url
{{- with $s.operatorTokens.name }}
- env: URLFLOW_OPERATOR_TOKENS_FILE
  name: {{ . | quote }}
  key: {{ $s.operatorTokens.key | quote }}
  file: operator-tokens
{{- end }}
{{- with $s.operatorReadonlyTokens.name }}
- env: URLFLOW_OPERATOR_READONLY_TOKENS_FILE
  name: {{ . | quote }}
  key: {{ $s.operatorReadonlyTokens.key | quote }}
  file: operator-readonly-tokens
{{- end }}
{{- if or $s.userReferenceKey.name (and .Values.config.enabled .Values.config.file.services) }}
- env: URLFLOW_USER_REFERENCE_KEY_FILE
  name: {{ required "secrets.userReferenceKey.name is required when config.file has services: an existing Secret holding base64 of 32 random bytes (openssl rand -base64 32)" $s.userReferenceKey.name | quote }}
  key: {{ $s.userReferenceKey.key | quote }}
  file: user-reference-key
{{- end }}
{{- end }}

{{/* Every secret setting of docs/configuration.md: extraEnv may not set any of them. */}}
{{- define "urlflow.secretSettings" -}}
{{- list "URLFLOW_KEYS" "URLFLOW_REDIS_URL" "URLFLOW_OIDC_CLIENT_SECRET" "URLFLOW_OPERATOR_TOKENS" "URLFLOW_OPERATOR_READONLY_TOKENS" "URLFLOW_USER_REFERENCE_KEY" "URLFLOW_TOKEN" "URLFLOW_HOOK_TOKEN" | toJson }}
{{- end }}

{{/* The environment the chart sets, as a YAML list of EnvVar. */}}
{{- define "urlflow.env" -}}
- name: URLFLOW_ADDR
  value: {{ printf ":%d" (int .Values.containerPort) | quote }}
- name: URLFLOW_PUBLIC_URL
  value: {{ required "publicUrl is required: the https URL people and clients reach urlflow at (URLFLOW_PUBLIC_URL)" .Values.publicUrl | quote }}
- name: URLFLOW_OIDC_ISSUER
  value: {{ required "oidc.issuer is required: your OpenID issuer (URLFLOW_OIDC_ISSUER)" .Values.oidc.issuer | quote }}
- name: URLFLOW_OIDC_CLIENT_ID
  value: {{ required "oidc.clientId is required: the client urlflow is registered as at the issuer (URLFLOW_OIDC_CLIENT_ID)" .Values.oidc.clientId | quote }}
{{- with .Values.oidc.scopes }}
- name: URLFLOW_OIDC_SCOPES
  value: {{ join " " . | quote }}
{{- end }}
{{- if .Values.oidc.introspection }}
- name: URLFLOW_OIDC_INTROSPECTION
  value: "true"
{{- end }}
{{- with .Values.trustedProxies }}
- name: URLFLOW_TRUSTED_PROXIES
  value: {{ join ", " . | quote }}
{{- end }}
{{- with .Values.logLevel }}
- name: URLFLOW_LOG_LEVEL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.logFormat }}
- name: URLFLOW_LOG_FORMAT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.elicitation.style }}
- name: URLFLOW_ELICITATION_STYLE
  value: {{ . | quote }}
{{- end }}
{{- with .Values.elicitation.ttl }}
- name: URLFLOW_ELICITATION_TTL
  value: {{ . | quote }}
{{- end }}
- name: URLFLOW_SHUTDOWN_GRACE
  value: {{ printf "%ds" (int .Values.shutdownGraceSeconds) | quote }}
- name: URLFLOW_REDIS_TOPOLOGY
  value: {{ .Values.redis.topology | quote }}
{{- if .Values.config.enabled }}
- name: URLFLOW_CONFIG
  value: /etc/urlflow/urlflow.yaml
{{- end }}
{{- range include "urlflow.secretFiles" . | fromYamlArray }}
- name: {{ .env }}
  value: {{ printf "/run/secrets/urlflow/%s" .file | quote }}
{{- end }}
{{- end }}

{{/*
extraEnv, checked: no variable the chart sets, no secret setting (with or without _FILE:
secrets and extraSecretMounts are the way), no test-only setting (urlflow serve refuses them).
*/}}
{{- define "urlflow.extraEnv" -}}
{{- $taken := list }}
{{- range include "urlflow.env" . | fromYamlArray }}
{{- $taken = append $taken .name }}
{{- end }}
{{- $secret := include "urlflow.secretSettings" . | fromJsonArray }}
{{- range .Values.extraEnv }}
{{- if has .name $taken }}
{{- fail (printf "extraEnv: %s is set by the chart; use its value instead (README.md)" .name) }}
{{- end }}
{{- if or (has .name $secret) (has (trimSuffix "_FILE" .name) $secret) }}
{{- fail (printf "extraEnv: %s holds a secret; give it through secrets.* or extraSecretMounts, never as a value" .name) }}
{{- end }}
{{- if hasPrefix "URLFLOW_TEST_" .name }}
{{- fail (printf "extraEnv: %s is test-only, and urlflow serve refuses to start with it" .name) }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* terminationGracePeriodSeconds: the preStop sleep, the drain, 5 s for streams and 5 s more. */}}
{{- define "urlflow.terminationGracePeriodSeconds" -}}
{{- add (int .Values.preStopSleepSeconds) (int .Values.shutdownGraceSeconds) 10 }}
{{- end }}

{{/* The host of the Ingress: ingress.host, else publicUrl's host without its port. */}}
{{- define "urlflow.ingressHost" -}}
{{- if .Values.ingress.host }}
{{- .Values.ingress.host }}
{{- else }}
{{- $url := required "publicUrl is required: the https URL people and clients reach urlflow at (URLFLOW_PUBLIC_URL)" .Values.publicUrl }}
{{- (split ":" (urlParse $url).host)._0 }}
{{- end }}
{{- end }}

{{/* topologySpreadConstraints by node and by zone, as topologySpread enables them. */}}
{{- define "urlflow.topologySpread" -}}
{{- $constraints := list }}
{{- range $key, $topology := dict "hostname" "kubernetes.io/hostname" "zone" "topology.kubernetes.io/zone" }}
{{- $c := index $.Values.topologySpread $key }}
{{- if $c.enabled }}
{{- $constraints = append $constraints (dict "maxSkew" $c.maxSkew "topologyKey" $topology "whenUnsatisfiable" $c.whenUnsatisfiable "labelSelector" (dict "matchLabels" (include "urlflow.selectorLabels" $ | fromYaml)) "matchLabelKeys" (list "pod-template-hash")) }}
{{- end }}
{{- end }}
{{- with $constraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
