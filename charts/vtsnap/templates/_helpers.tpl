{{/* Names: <release>-vtsnap unless the release already says vtsnap; 52 chars leave room for suffixes. */}}
{{- define "vtsnap.fullname" -}}
{{- if contains "vtsnap" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-vtsnap" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "vtsnap.labels" -}}
app.kubernetes.io/name: vtsnap
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- range $k, $v := .Values.commonLabels }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end -}}

{{/* Selector labels of one program: (dict "root" $ "program" "gc") */}}
{{- define "vtsnap.selector" -}}
app.kubernetes.io/name: vtsnap
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .program }}
{{- end -}}

{{/* The image of one program; the tag is never latest (the schema refuses it). */}}
{{- define "vtsnap.image" -}}
{{- $i := .root.Values.image -}}
{{- $tag := default .root.Chart.AppVersion $i.tag -}}
{{- if eq (lower $tag) "latest" -}}{{- fail "image.tag: latest is refused; name the version" -}}{{- end -}}
{{- if $i.registry -}}{{ $i.registry }}/{{- end -}}{{ $i.repository }}/vtsnap-{{ .program }}:{{ $tag }}
{{- end -}}

{{/* The configured clusters' namespaces, each once, as a list. */}}
{{- define "vtsnap.namespaces" -}}
{{- $seen := list -}}
{{- range .Values.config.clusters -}}{{- $seen = append $seen .namespace -}}{{- end -}}
{{- toJson (uniq $seen) -}}
{{- end -}}

{{/* Vitess' SafeName of a shard: a leading or trailing - becomes x (-80 → x-80). */}}
{{- define "vtsnap.shardSafe" -}}
{{- regexReplaceAll "-$" (regexReplaceAll "^-" . "x-") "-x" -}}
{{- end -}}

{{/* A DNS-1123 name at most .max long: readable, with a hash when shortened. */}}
{{- define "vtsnap.dnsName" -}}
{{- $n := regexReplaceAll "[^a-z0-9-]" (lower .name) "-" | trimAll "-" -}}
{{- if gt (len $n) (int .max) -}}
{{- printf "%s-%s" (trunc (int (sub .max 9)) $n | trimSuffix "-") (sha256sum .name | trunc 8) -}}
{{- else -}}{{ $n }}{{- end -}}
{{- end -}}

{{/* A shard's CronJob name, the schedule reconciler's rule (docs/design.md §5.8):
     <fullname>-<kind>-[<namespace>-]<cluster>-<keyspace>-<shard>, the namespace only when
     config.clusters names the cluster in more than one namespace; refused when it is
     needed and not given (a chart entry names no namespace).
     (dict "root" $ "kind" "snap" "namespace" "" "cluster" … "keyspace" … "shard" …) */}}
{{- define "vtsnap.shardCronjobName" -}}
{{- $namespaces := list -}}
{{- range .root.Values.config.clusters -}}
{{- if eq .name $.cluster -}}{{- $namespaces = append $namespaces .namespace -}}{{- end -}}
{{- end -}}
{{- $namespaces = uniq $namespaces -}}
{{- $ns := "" -}}
{{- if gt (len $namespaces) 1 -}}
{{- if not .namespace -}}
{{- fail (printf "cluster %q is in more than one namespace of config.clusters (%s): the %s CronJob of %s/%s needs the schedule reconciler (snapshot.reconcile.enabled), which names each namespace's apart" .cluster (join ", " $namespaces) .kind .keyspace .shard) -}}
{{- end -}}
{{- $ns = printf "%s-" .namespace -}}
{{- end -}}
{{- include "vtsnap.dnsName" (dict "name" (printf "%s-%s-%s%s-%s-%s" (include "vtsnap.fullname" .root) .kind $ns .cluster .keyspace (include "vtsnap.shardSafe" .shard)) "max" 52) -}}
{{- end -}}

{{/* Exit codes that must not be retried (DESIGN: 2 usage, 3 refused, 4 unfence incomplete). */}}
{{- define "vtsnap.podFailurePolicy" -}}
podFailurePolicy:
  rules:
  - action: FailJob
    onExitCodes:
      containerName: {{ . }}
      operator: In
      values: [2, 3, 4]
  - action: Ignore
    onPodConditions:
    - type: DisruptionTarget
{{- end -}}

{{/* Pod-level hardening shared by the non-privileged programs. */}}
{{- define "vtsnap.restrictedPod" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
{{- end -}}
{{- /* The same, for a Pod that reads Vitess's file backup storage: Vitess writes it
     without world permission (go/os2: directories 0770, files 0660), so the readers are
     in the tablets' group as well. (dict "root" $ "groups" list) */}}
{{- define "vtsnap.restrictedPodWithGroups" -}}
{{- include "vtsnap.restrictedPod" .root }}
{{- with .groups }}
  supplementalGroups: {{ toJson . }}
{{- end }}
{{- end -}}
{{- define "vtsnap.restrictedContainer" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
{{- end -}}

{{/* One CronJob of a per-cluster program: (dict "root" $ "program" "gc" "values" .Values.gc "args" list "account" "gc") */}}
{{- define "vtsnap.cronjob" -}}
{{- $root := .root -}}
{{- $v := .values -}}
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {{ .name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "vtsnap.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .program }}
    {{- range $k, $val := .extraLabels }}
    {{ $k }}: {{ $val | quote }}
    {{- end }}
spec:
  schedule: {{ .schedule | quote }}
  {{- with $v.timeZone }}
  timeZone: {{ . | quote }}
  {{- end }}
  {{- if .suspend }}
  suspend: true
  {{- end }}
  # One run at a time: a second snapshot of a shard would be refused by its fence anyway.
  concurrencyPolicy: Forbid
  {{- with $v.startingDeadlineSeconds }}
  startingDeadlineSeconds: {{ . }}
  {{- end }}
  successfulJobsHistoryLimit: {{ $v.successfulJobsHistoryLimit }}
  failedJobsHistoryLimit: {{ $v.failedJobsHistoryLimit }}
  jobTemplate:
    metadata:
      labels:
        {{- include "vtsnap.selector" (dict "root" $root "program" .program) | nindent 8 }}
        {{- range $k, $val := .extraLabels }}
        {{ $k }}: {{ $val | quote }}
        {{- end }}
    spec:
      activeDeadlineSeconds: {{ $v.activeDeadlineSeconds }}
      backoffLimit: {{ $v.backoffLimit }}
      {{- include "vtsnap.podFailurePolicy" .container | nindent 6 }}
      template:
        metadata:
          labels:
            {{- include "vtsnap.selector" (dict "root" $root "program" .program) | nindent 12 }}
            {{- range $k, $val := .extraLabels }}
            {{ $k }}: {{ $val | quote }}
            {{- end }}
        spec:
          serviceAccountName: {{ include "vtsnap.fullname" $root }}-{{ .program }}
          restartPolicy: Never
          {{- with $root.Values.imagePullSecrets }}
          imagePullSecrets: {{ toYaml . | nindent 12 }}
          {{- end }}
          {{- include "vtsnap.restrictedPodWithGroups" (dict "root" $root "groups" .supplementalGroups) | nindent 10 }}
          containers:
          - name: {{ .container }}
            image: {{ include "vtsnap.image" (dict "root" $root "program" (default .program .image)) }}
            imagePullPolicy: {{ $root.Values.image.pullPolicy }}
            args:
            {{- range .args }}
            - {{ . | quote }}
            {{- end }}
            env:
            - {name: VTSNAP_CONFIG, value: /etc/vtsnap/config.yaml}
            - {name: VTSNAP_LOG_FORMAT, value: {{ $root.Values.logFormat | quote }}}
            {{- with .env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
            {{- with .envFromSecret }}
            envFrom:
            - secretRef: {name: {{ . | quote }}}
            {{- end }}
            {{- include "vtsnap.restrictedContainer" $root | nindent 12 }}
            {{- with $v.resources }}
            resources: {{ toYaml . | nindent 14 }}
            {{- end }}
            volumeMounts:
            - {name: config, mountPath: /etc/vtsnap, readOnly: true}
            {{- range .mounts }}
            - {name: {{ .name }}, mountPath: {{ .mountPath | quote }}, readOnly: true}
            {{- end }}
          volumes:
          - name: config
            configMap:
              name: {{ include "vtsnap.fullname" $root }}-config
          {{- range .mounts }}
          - {{ merge (dict "name" .name) .volume | toJson }}
          {{- end }}
{{- end -}}

{{- /* vtsnap-drill's arguments before the shard's, as a JSON list: the same for a drill
     CronJob the chart renders and for the template the schedule reconciler reads. */}}
{{- define "vtsnap.drillArgs" -}}
{{- $root := . -}}
{{- $d := .Values.drill -}}
{{- $args := list "run" "--restore-image" (include "vtsnap.image" (dict "root" $root "program" "restore")) "--checker-image" (include "vtsnap.image" (dict "root" $root "program" "drill")) "--deadline" $d.deadline "--ready-timeout" $d.readyTimeout "--table-budget" $d.tableBudget (printf "--drill-uid=%d" (int64 $d.drillUid)) "--mysqld-command" $d.mysqldCommand "--mysqld-resources" ($d.mysqldResources | toJson) -}}
{{- /* The drill Pod pulls the tablet's image and vtsnap's with the same Secrets. */}}
{{- range .Values.imagePullSecrets }}{{ $args = concat $args (list "--image-pull-secret" .name) }}{{ end -}}
{{- $args | toJson -}}
{{- end -}}

{{- /* A throwaway restore's PVC and Pod (a drill's, a recovery's) are its Job's: the Job's name and UID, from the Pod's own
     labels, and its namespace (an owner of another namespace than the shard's is named
     in annotations, not made an owner). A JSON list of env entries. */}}
{{- define "vtsnap.ownerEnv" -}}
{{- list (dict "name" "VTSNAP_OWNER_NAME" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.labels['batch.kubernetes.io/job-name']"))) (dict "name" "VTSNAP_OWNER_UID" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.labels['batch.kubernetes.io/controller-uid']"))) (dict "name" "VTSNAP_OWNER_NAMESPACE" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.namespace"))) | toJson -}}
{{- end -}}
