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

{{/* The node gate's ServiceAccount and DaemonSet, and its instance label:
nodeGate.name, else <full name>-node-gate. */}}
{{- define "selfdestruct.gateName" -}}
{{- .Values.nodeGate.name | default (printf "%s-node-gate" (include "selfdestruct.fullname" .)) -}}
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
{{ .Values.priorityClass.name | default (include "selfdestruct.clusterName" (list . "")) }}
{{- else -}}
{{ required "priorityClass.name: the existing PriorityClass to use (priorityClass.create is false)" .Values.priorityClass.name }}
{{- end -}}
{{- end -}}

{{/* A cluster-scoped object's name: the release's full name and a suffix,
then "." and the release namespace. Cluster-scoped names are shared by every
namespace, so the same release name in two namespaces must not collide; a
namespace holds no ".", so the part after the last "." names it (helm lint
renders with none: then Helm's "default"). Call with
(list $ "suffix"), "" for none. */}}
{{- define "selfdestruct.clusterName" -}}
{{- $ := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- $base := include "selfdestruct.fullname" $ -}}
{{- if $suffix }}{{ $base = printf "%s-%s" $base $suffix }}{{ end -}}
{{ printf "%s.%s" $base ($.Release.Namespace | default "default") }}
{{- end -}}

{{/* A placeholder set's StatefulSet name: the release's full name and the
set's, so two releases in one namespace never collide; a set named like the
release's full name (the default: release `placeholder`, set `placeholder`)
is the full name alone. At most 52 characters: the controller-revision-hash
label adds 11 to it and a label value holds 63. Call with (list $ $set). */}}
{{- define "selfdestruct.setName" -}}
{{- $ := index . 0 -}}
{{- $set := index . 1 -}}
{{- $base := include "selfdestruct.fullname" $ -}}
{{- $name := eq $set.name $base | ternary $base (printf "%s-%s" $base $set.name) -}}
{{- if gt (len $name) 52 -}}
{{- fail (printf "placeholders: the StatefulSet of set %q would be named %q, %d characters; at most 52 fit (the pods' controller-revision-hash label adds 11 and holds 63): shorten the set's name, the release name or fullnameOverride" $set.name $name (len $name)) -}}
{{- end -}}
{{ $name }}
{{- end -}}

{{/* A duration setting (90s, 1h30m, 1.5h, 2d, 0) in seconds, as a float;
the forms values.schema.json allows. */}}
{{- define "selfdestruct.seconds" -}}
{{- $unit := dict "ns" 0.000000001 "us" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 "d" 86400.0 "w" 604800.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h|d|w)" (toString .) -1 -}}
{{- $n := regexFind "^[0-9]+(\\.[0-9]+)?" . | float64 -}}
{{- $total = addf $total (mulf $n (get $unit (regexReplaceAll "^[0-9.]+" . ""))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* The agent settings of a set: the set's own over the release's. The
lifetime pair (SELFDESTRUCT_MIN_LIFETIME, SELFDESTRUCT_MAX_LIFETIME) is taken
whole from the first level that names either of them (the set, else the
release), so one bound set alone is never paired with a bound the user did
not set; where neither names one, there is no lifetime (the agent's default;
docs/settings.md, "Why no lifetime by default"). A minimum above the maximum is refused here (the
agent would exit 2 on it). Call with (list $ $set); returns YAML. */}}
{{- define "selfdestruct.settings" -}}
{{- $ := index . 0 -}}
{{- $set := index . 1 -}}
{{- $pair := list "SELFDESTRUCT_MIN_LIFETIME" "SELFDESTRUCT_MAX_LIFETIME" -}}
{{- $own := $set.settings | default dict -}}
{{- $release := $.Values.settings | default dict -}}
{{- $settings := merge (omit (deepCopy $own) "SELFDESTRUCT_MIN_LIFETIME" "SELFDESTRUCT_MAX_LIFETIME") (omit $release "SELFDESTRUCT_MIN_LIFETIME" "SELFDESTRUCT_MAX_LIFETIME") -}}
{{- $where := printf "placeholders[%s].settings" $set.name -}}
{{- $from := dict -}}
{{- if or (hasKey $own (index $pair 0)) (hasKey $own (index $pair 1)) -}}
{{- $from = $own -}}
{{- else if or (hasKey $release (index $pair 0)) (hasKey $release (index $pair 1)) -}}
{{- $from = $release -}}
{{- $where = "settings" -}}
{{- end -}}
{{- range $pair -}}
{{- if hasKey $from . -}}
{{- $_ := set $settings . (index $from .) -}}
{{- end -}}
{{- end -}}
{{- $min := toString (get $settings "SELFDESTRUCT_MIN_LIFETIME") -}}
{{- $max := toString (get $settings "SELFDESTRUCT_MAX_LIFETIME") -}}
{{- if and $min $max (ne $min "<nil>") (ne $max "<nil>") -}}
{{- $lo := include "selfdestruct.seconds" $min | float64 -}}
{{- $hi := include "selfdestruct.seconds" $max | float64 -}}
{{- if and (gt $hi 0.0) (gt $lo $hi) -}}
{{- fail (printf "%s: SELFDESTRUCT_MIN_LIFETIME (%s) is above SELFDESTRUCT_MAX_LIFETIME (%s); the lifetime is drawn from [min, max], so the minimum must be at most the maximum (the agent would exit 2 on it)" $where $min $max) -}}
{{- end -}}
{{- end -}}
{{- toYaml $settings -}}
{{- end -}}
