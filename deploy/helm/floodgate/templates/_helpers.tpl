{{- define "floodgate.name" -}}{{ .Release.Name }}{{- end -}}
{{- define "floodgate.labels" -}}
app.kubernetes.io/name: floodgate
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "floodgate.selector" -}}
app.kubernetes.io/name: floodgate
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
