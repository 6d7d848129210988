{{/* The release's full name: fullnameOverride, else the release name. */}}
{{- define "selfdestruct.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of the placeholders: the agent's default sibling
selector and the PodDisruptionBudget select exactly these two. */}}
{{- define "selfdestruct.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object's metadata: the selector labels and Helm's own. */}}
{{- define "selfdestruct.labels" -}}
{{ include "selfdestruct.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Labels of the node gate's objects: another instance, so the gate's pods
are neither siblings of the placeholders nor selected by their budget. */}}
{{- define "selfdestruct.gateSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ include "selfdestruct.gateName" . }}
{{- end -}}

{{- define "selfdestruct.gateLabels" -}}
{{ include "selfdestruct.gateSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "selfdestruct.gateName" -}}
{{ include "selfdestruct.fullname" . }}-node-gate
{{- end -}}

{{/* The agent's image: repository@digest, else repository:tag (default: the
chart's appVersion). */}}
{{- define "selfdestruct.image" -}}
{{- with .Values.image -}}
{{- if .digest -}}
{{ .repository }}@{{ .digest }}
{{- else -}}
{{ .repository }}:{{ .tag | default $.Chart.AppVersion }}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "selfdestruct.priorityClassName" -}}
{{- if .Values.priorityClass.create -}}
{{ .Values.priorityClass.name | default (include "selfdestruct.fullname" .) }}
{{- else -}}
{{ required "priorityClass.name: the existing PriorityClass to use (priorityClass.create is false)" .Values.priorityClass.name }}
{{- end -}}
{{- end -}}
