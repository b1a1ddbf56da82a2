{{/*
Chart name, truncated to the 63 characters Kubernetes allows in a label value.
*/}}
{{- define "karpy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: <release>-<chart>, or the release name alone when it already contains the chart name.
*/}}
{{- define "karpy.fullname" -}}
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

{{- define "karpy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The cloud, validated here too: values.schema.json is skipped with --skip-schema-validation.
*/}}
{{- define "karpy.cloud" -}}
{{- $cloud := .Values.cloud | toString }}
{{- if not (has $cloud (list "aws" "kakaocloud")) }}
{{- fail (printf "cloud must be \"aws\" or \"kakaocloud\", not %q" $cloud) }}
{{- end }}
{{- $cloud }}
{{- end }}

{{/*
Common labels.
*/}}
{{- define "karpy.labels" -}}
helm.sh/chart: {{ include "karpy.chart" . }}
{{ include "karpy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: controller
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels (immutable on the Deployment: never add to these).
*/}}
{{- define "karpy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "karpy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Controller image: <repository>@<digest> or <repository>:<tag>; the repository defaults to the
per-cloud image deploy/Dockerfile builds (karpy-<cloud>).
*/}}
{{- define "karpy.image" -}}
{{- $repository := .Values.image.repository | default (printf "karpy-%s" (include "karpy.cloud" .)) }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{- define "karpy.kakaocloud.projectID" -}}
{{- .Values.kakaocloud.projectID | default .Values.projectID | toString }}
{{- end }}

{{/*
The NodeClass kind of the selected cloud, as RBAC needs it: group and plural resource.
*/}}
{{- define "karpy.nodeClassGroup" -}}
{{- if eq (include "karpy.cloud" .) "aws" }}karpenter.k8s.aws{{ else }}karpenter.kakaocloud.com{{ end }}
{{- end }}
{{- define "karpy.nodeClassResource" -}}
{{- if eq (include "karpy.cloud" .) "aws" }}ec2nodeclasses{{ else }}kcnodeclasses{{ end }}
{{- end }}

{{/*
Pod affinity: .Values.affinity, with {karpenter.sh/nodepool DoesNotExist} ANDed into every
required nodeSelectorTerm (nodeSelectorTerms are ORed, so adding a separate term would let the
pod onto a managed node through the user's term). A term without matchExpressions gets one; no
terms at all gets a single term. Works on a deep copy: .Values is never modified.
*/}}
{{- define "karpy.affinity" -}}
{{- $affinity := mustDeepCopy (.Values.affinity | default dict) }}
{{- if .Values.keepOffManagedNodes }}
{{- $key := "karpenter.sh/nodepool" }}
{{- $nodeAffinity := get $affinity "nodeAffinity" | default dict }}
{{- $required := get $nodeAffinity "requiredDuringSchedulingIgnoredDuringExecution" | default dict }}
{{- $terms := get $required "nodeSelectorTerms" | default list }}
{{- if not $terms }}
{{- $terms = list (dict) }}
{{- end }}
{{- $newTerms := list }}
{{- range $i, $term := $terms }}
{{- $term = $term | default dict }}
{{- $expressions := get $term "matchExpressions" | default list }}
{{- $present := false }}
{{- range $expressions }}
{{- if eq (get . "key" | toString) $key }}
{{- if ne (get . "operator" | toString) "DoesNotExist" }}
{{- fail (printf "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d] selects %s with operator %v: the controller must not run on nodes it manages (set keepOffManagedNodes=false to allow it)" $i $key (get . "operator")) }}
{{- end }}
{{- $present = true }}
{{- end }}
{{- end }}
{{- if not $present }}
{{- $expressions = append $expressions (dict "key" $key "operator" "DoesNotExist") }}
{{- end }}
{{- $newTerms = append $newTerms (set $term "matchExpressions" $expressions) }}
{{- end }}
{{- $_ := set $required "nodeSelectorTerms" $newTerms }}
{{- $_ = set $nodeAffinity "requiredDuringSchedulingIgnoredDuringExecution" $required }}
{{- $_ = set $affinity "nodeAffinity" $nodeAffinity }}
{{- end }}
{{- if $affinity }}
{{- toYaml $affinity }}
{{- end }}
{{- end }}
