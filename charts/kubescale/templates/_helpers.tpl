{{- define "kubescale.labels" -}}
app.kubernetes.io/name: kubescale
{{- end -}}

{{/* Every flag group's flags as --name=value, groups in a fixed order, names sorted. */}}
{{- define "kubescale.flagArgs" -}}
{{- $flags := .Values.flags -}}
{{- range $group := list "server" "logging" "leaderElection" "webhook" "recommender" "updater" "hpa" "clusterAutoscaler" "descheduler" "extender" }}
{{- $values := index $flags $group | default dict }}
{{- range $name := keys $values | sortAlpha }}
- --{{ $name }}={{ index $values $name }}
{{- end }}
{{- end }}
{{- end -}}
