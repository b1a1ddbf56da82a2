{{/*
The name in resource names and app.kubernetes.io/name: nameOverride, else Karpenter's chart name
"karpenter" (not this chart's, karpy), so a release "karpenter" renders Karpenter's object names
(IRSA trust policies, dashboards' job="karpenter"). Truncated to the 63 characters of a label value.
*/}}
{{- define "karpy.name" -}}
{{- default "karpenter" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: <release>-<name>, or the release name alone when it already contains the name.
*/}}
{{- define "karpy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "karpy.name" . }}
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
The built-in cloud (`cloud`), validated here too: values.schema.json is skipped with
--skip-schema-validation.
*/}}
{{- define "karpy.cloud" -}}
{{- $cloud := .Values.cloud | toString }}
{{- if not (has $cloud (list "aws" "kakaocloud")) }}
{{- fail (printf "cloud must be \"aws\" or \"kakaocloud\", not %q" $cloud) }}
{{- end }}
{{- $cloud }}
{{- end }}

{{/*
The provider plugin the controller runs (--cloud-provider): `cloudProvider`, else `cloud`. "aws"
and "kakaocloud" get their cloud's settings, Secrets and NodeClass RBAC; any other name is a
third-party provider.
*/}}
{{- define "karpy.provider" -}}
{{- $cloud := include "karpy.cloud" . }}
{{- .Values.cloudProvider | default $cloud | toString }}
{{- end }}

{{/*
A value with an older karpy alias: the Karpenter-named value, else the alias; both set and
different is an error. Call with (list CANONICAL_NAME CANONICAL ALIAS_NAME ALIAS).
*/}}
{{- define "karpy.aliased" -}}
{{- $name := index . 0 }}{{ $value := index . 1 }}{{ $aliasName := index . 2 }}{{ $alias := index . 3 }}
{{- if and (not (kindIs "invalid" $value)) (ne (toString $value) "") (not (kindIs "invalid" $alias)) (ne (toString $alias) "") (ne (toString $value) (toString $alias)) }}
{{- fail (printf "%s (%v) and its alias %s (%v) differ: set one of them" $name $value $aliasName $alias) }}
{{- end }}
{{- if and (not (kindIs "invalid" $value)) (ne (toString $value) "") }}{{ $value }}{{ else if not (kindIs "invalid" $alias) }}{{ $alias }}{{ end }}
{{- end }}

{{- define "karpy.clusterName" -}}
{{- $name := include "karpy.aliased" (list "settings.clusterName" (tpl (.Values.settings.clusterName | default "" | toString) .) "clusterName" (tpl (.Values.clusterName | default "" | toString) .)) }}
{{- required "settings.clusterName is required (the name of this Kubernetes cluster; clusterName is accepted too)" $name }}
{{- end }}

{{- define "karpy.clusterEndpoint" -}}
{{- include "karpy.aliased" (list "settings.clusterEndpoint" (tpl (.Values.settings.clusterEndpoint | default "" | toString) .) "clusterEndpoint" (tpl (.Values.clusterEndpoint | default "" | toString) .)) }}
{{- end }}

{{- define "karpy.interruptionQueue" -}}
{{- include "karpy.aliased" (list "settings.interruptionQueue" (tpl (.Values.settings.interruptionQueue | default "" | toString) .) "aws.interruptionQueue" (tpl ((.Values.aws).interruptionQueue | default "" | toString) .)) }}
{{- end }}

{{/*
Ports: karpy's older metricsPort / healthPort (default null) win when set, since Karpenter's
controller.metrics.port / controller.healthProbe.port always have a value.
*/}}
{{- define "karpy.metricsPort" -}}
{{- if kindIs "invalid" .Values.metricsPort }}{{ .Values.controller.metrics.port | int }}{{ else }}{{ .Values.metricsPort | int }}{{ end }}
{{- end }}

{{- define "karpy.healthPort" -}}
{{- if kindIs "invalid" .Values.healthPort }}{{ .Values.controller.healthProbe.port | int }}{{ else }}{{ .Values.healthPort | int }}{{ end }}
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
Controller image: <repository>@<digest> or <repository>:<tag>. Karpenter's controller.image.*
wins over karpy's image.*; the repository defaults to the image deploy/Dockerfile builds for the
provider (karpy-<provider>).
*/}}
{{- define "karpy.image" -}}
{{- $image := .Values.controller.image | default dict }}
{{- $repository := $image.repository | default .Values.image.repository | default (printf "karpy-%s" (include "karpy.provider" .)) }}
{{- $digest := $image.digest | default .Values.image.digest }}
{{- if $digest }}
{{- printf "%s@%s" $repository $digest }}
{{- else }}
{{- printf "%s:%s" $repository ($image.tag | default .Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{- define "karpy.imagePullPolicy" -}}
{{- .Values.image.pullPolicy | default .Values.imagePullPolicy | default "IfNotPresent" }}
{{- end }}

{{- define "karpy.containerName" -}}
{{- .Values.controller.containerName | default "controller" }}
{{- end }}

{{- define "karpy.kakaocloud.projectID" -}}
{{- .Values.kakaocloud.projectID | default .Values.projectID | toString }}
{{- end }}

{{/*
The NodeClass kind of the provider, as RBAC needs it: group and plural resource. The built-in
clouds know theirs; a third-party provider names it in `nodeClass`.
*/}}
{{- define "karpy.nodeClassGroup" -}}
{{- $provider := include "karpy.provider" . }}
{{- if eq $provider "aws" }}karpenter.k8s.aws
{{- else if eq $provider "kakaocloud" }}karpenter.kakaocloud.com
{{- else }}{{ required (printf "nodeClass.group is required for the third-party provider %q (the API group of its NodeClass kind)" $provider) (.Values.nodeClass).group }}
{{- end }}
{{- end }}
{{- define "karpy.nodeClassResource" -}}
{{- $provider := include "karpy.provider" . }}
{{- if eq $provider "aws" }}ec2nodeclasses
{{- else if eq $provider "kakaocloud" }}kcnodeclasses
{{- else }}{{ required (printf "nodeClass.resource is required for the third-party provider %q (the plural resource of its NodeClass kind)" $provider) (.Values.nodeClass).resource }}
{{- end }}
{{- end }}

{{/*
A copy of `obj` with labelSelector set to the controller's pod labels when it has none (Karpenter's
chart does the same for its affinity and spread terms). Call with (list . obj).
*/}}
{{- define "karpy.withSelector" -}}
{{- $root := index . 0 }}
{{- $obj := mustDeepCopy (index . 1 | default dict) }}
{{- if not (hasKey $obj "labelSelector") }}
{{- $_ := set $obj "labelSelector" (dict "matchLabels" (include "karpy.selectorLabels" $root | fromYaml)) }}
{{- end }}
{{- toJson $obj }}
{{- end }}

{{/*
Pod affinity: .Values.affinity, pod (anti-)affinity terms without a labelSelector given the
controller's pod labels, and {karpenter.sh/nodepool DoesNotExist} ANDed into every required
nodeSelectorTerm (nodeSelectorTerms are ORed, so adding a separate term would let the
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
{{- range $kind := list "podAffinity" "podAntiAffinity" }}
{{- $pod := get $affinity $kind }}
{{- if $pod }}
{{- $required := list }}
{{- range (get $pod "requiredDuringSchedulingIgnoredDuringExecution" | default list) }}
{{- $required = append $required (include "karpy.withSelector" (list $ .) | fromJson) }}
{{- end }}
{{- if $required }}
{{- $_ := set $pod "requiredDuringSchedulingIgnoredDuringExecution" $required }}
{{- end }}
{{- $preferred := list }}
{{- range (get $pod "preferredDuringSchedulingIgnoredDuringExecution" | default list) }}
{{- $weighted := mustDeepCopy . }}
{{- $_ := set $weighted "podAffinityTerm" (include "karpy.withSelector" (list $ (get $weighted "podAffinityTerm")) | fromJson) }}
{{- $preferred = append $preferred $weighted }}
{{- end }}
{{- if $preferred }}
{{- $_ := set $pod "preferredDuringSchedulingIgnoredDuringExecution" $preferred }}
{{- end }}
{{- end }}
{{- end }}
{{- if $affinity }}
{{- toYaml $affinity }}
{{- end }}
{{- end }}

{{/*
Feature gates in Karpenter's FEATURE_GATES syntax (Name=bool,...; Karpenter's chart order).
settings.nodeRepair, karpy's older name, wins over featureGates.nodeRepair when set.
*/}}
{{- define "karpy.featureGates" -}}
{{- $gates := .Values.settings.featureGates | default dict }}
{{- $nodeRepair := $gates.nodeRepair }}
{{- if not (kindIs "invalid" .Values.settings.nodeRepair) }}{{ $nodeRepair = .Values.settings.nodeRepair }}{{ end }}
{{- $out := list }}
{{- range $pair := list (list "ReservedCapacity" $gates.reservedCapacity) (list "SpotToSpotConsolidation" $gates.spotToSpotConsolidation) (list "NodeRepair" $nodeRepair) (list "NodeOverlay" $gates.nodeOverlay) (list "StaticCapacity" $gates.staticCapacity) (list "CapacityBuffer" $gates.capacityBuffer) }}
{{- $out = append $out (printf "%s=%t" (index $pair 0) (index $pair 1 | default false)) }}
{{- end }}
{{- join "," $out }}
{{- end }}

{{/*
The controller's environment (a JSON list of EnvVar): every setting under the name Karpenter's
chart gives it (the AWS-only ones for the aws provider only: karpy refuses them elsewhere), the
built-in cloud's credentials and files, then extraEnv and controller.env. A
chart variable that extraEnv or controller.env sets again is left out, so the user's wins.
*/}}
{{- define "karpy.env" -}}
{{- $provider := include "karpy.provider" . }}
{{- $s := .Values.settings }}
{{- $env := list }}
{{- $env = append $env (dict "name" "SYSTEM_NAMESPACE" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.namespace"))) }}
{{- $env = append $env (dict "name" "POD_NAME" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) }}
{{- $env = append $env (dict "name" "CLUSTER_NAME" "value" (include "karpy.clusterName" .)) }}
{{- $env = append $env (dict "name" "LOG_LEVEL" "value" (.Values.logLevel | toString)) }}
{{- $env = append $env (dict "name" "LOG_OUTPUT_PATHS" "value" (join "," (.Values.logOutputPaths | default (list "stdout")))) }}
{{- $env = append $env (dict "name" "LOG_ERROR_OUTPUT_PATHS" "value" (join "," (.Values.logErrorOutputPaths | default (list "stderr")))) }}
{{- with .Values.logDebugLoggers }}
{{- $env = append $env (dict "name" "KARPY_LOG_DEBUG_LOGGERS" "value" (toString .)) }}
{{- end }}
{{- $env = append $env (dict "name" "METRICS_PORT" "value" (include "karpy.metricsPort" .)) }}
{{- $env = append $env (dict "name" "HEALTH_PROBE_PORT" "value" (include "karpy.healthPort" .)) }}
{{- if not .Values.leaderElection.enabled }}
{{- $env = append $env (dict "name" "DISABLE_LEADER_ELECTION" "value" "true") }}
{{- end }}
{{- with $s.kubeClientQPS }}
{{- $env = append $env (dict "name" "KUBE_CLIENT_QPS" "value" (toString .)) }}
{{- end }}
{{- with $s.kubeClientBurst }}
{{- $env = append $env (dict "name" "KUBE_CLIENT_BURST" "value" (toString .)) }}
{{- end }}
{{- if not (kindIs "invalid" $s.consolidationMinSavings) }}
{{- $env = append $env (dict "name" "KARPY_CONSOLIDATION_MIN_SAVINGS" "value" (toString $s.consolidationMinSavings)) }}
{{- end }}
{{- $env = append $env (dict "name" "FEATURE_GATES" "value" (include "karpy.featureGates" .)) }}
{{- range $pair := list (list "BATCH_MAX_DURATION" $s.batchMaxDuration) (list "BATCH_IDLE_DURATION" $s.batchIdleDuration) (list "PREFERENCE_POLICY" $s.preferencePolicy) (list "MIN_VALUES_POLICY" $s.minValuesPolicy) (list "IGNORE_DRA_REQUESTS" $s.ignoreDRARequests) (list "DISABLE_CLUSTER_STATE_OBSERVABILITY" $s.disableClusterStateObservability) }}
{{- with index $pair 1 }}
{{- $env = append $env (dict "name" (index $pair 0) "value" (tpl (toString .) $)) }}
{{- end }}
{{- end }}
{{- if eq $provider "aws" }}
{{- with include "karpy.clusterEndpoint" . }}
{{- $env = append $env (dict "name" "CLUSTER_ENDPOINT" "value" .) }}
{{- end }}
{{- with $s.clusterCABundle }}
{{- $env = append $env (dict "name" "CLUSTER_CA_BUNDLE" "value" (tpl (toString .) $)) }}
{{- end }}
{{- with (.Values.aws).region }}
{{- $env = append $env (dict "name" "AWS_REGION" "value" (tpl (toString .) $)) }}
{{- end }}
{{- with include "karpy.interruptionQueue" . }}
{{- $env = append $env (dict "name" "INTERRUPTION_QUEUE" "value" .) }}
{{- end }}
{{- range $pair := list (list "VM_MEMORY_OVERHEAD_PERCENT" $s.vmMemoryOverheadPercent) (list "ISOLATED_VPC" $s.isolatedVPC) (list "EKS_CONTROL_PLANE" $s.eksControlPlane) (list "ENABLE_ZONAL_SHIFT" $s.enableZonalShift) (list "RESERVED_ENIS" $s.reservedENIs) (list "DISABLE_DRY_RUN" $s.disableDryRun) (list "AMI_REFRESH_INTERVAL" $s.amiRefreshInterval) (list "SUBNET_REFRESH_INTERVAL" $s.subnetRefreshInterval) }}
{{- with index $pair 1 }}
{{- $env = append $env (dict "name" (index $pair 0) "value" (tpl (toString .) $)) }}
{{- end }}
{{- end }}
{{- $env = append $env (dict "name" "AWS_FEATURE_GATES" "value" (printf "NodeClassCEL=%t" (($s.awsFeatureGates).nodeClassCEL | default false))) }}
{{- end }}
{{- if eq $provider "kakaocloud" }}
{{- $credentials := required "credentials.secretName is required when cloud=kakaocloud (a Secret with applicationCredentialId, applicationCredentialSecret and region)" .Values.credentials.secretName }}
{{- $env = append $env (dict "name" "KAKAOCLOUD_PROJECT_ID" "value" (required "kakaocloud.projectID is required when cloud=kakaocloud" (include "karpy.kakaocloud.projectID" .))) }}
{{- range $pair := list (list "KAKAOCLOUD_APPLICATION_CREDENTIAL_ID" "applicationCredentialId") (list "KAKAOCLOUD_APPLICATION_CREDENTIAL_SECRET" "applicationCredentialSecret") (list "KAKAOCLOUD_REGION" "region") }}
{{- $env = append $env (dict "name" (index $pair 0) "valueFrom" (dict "secretKeyRef" (dict "name" $credentials "key" (index $pair 1)))) }}
{{- end }}
{{- $env = append $env (dict "name" "KAKAOCLOUD_KEYRING_FILE" "value" "/etc/karpy/keyring/keyring.json") }}
{{- end }}
{{- $user := concat (.Values.extraEnv | default list) (.Values.controller.env | default list) }}
{{- $userNames := list }}
{{- range $user }}{{ $userNames = append $userNames (get . "name") }}{{ end }}
{{- $out := list }}
{{- range $env }}
{{- if not (has (get . "name") $userNames) }}{{ $out = append $out . }}{{ end }}
{{- end }}
{{- toJson (concat $out $user) }}
{{- end }}

{{/*
KakaoCloud's values (projectID, kakaocloud.projectID, credentials.secretName, sigKey.secretName)
with a controller that is not KakaoCloud's: the KakaoCloud guide's command against a chart whose
`cloud` is aws would otherwise install an AWS controller. An error naming `cloud` instead.
*/}}
{{- define "karpy.validateCloud" -}}
{{- $provider := include "karpy.provider" . }}
{{- if ne $provider "kakaocloud" }}
{{- $set := list }}
{{- range $pair := list (list "projectID" .Values.projectID) (list "kakaocloud.projectID" (.Values.kakaocloud).projectID) (list "credentials.secretName" (.Values.credentials).secretName) (list "sigKey.secretName" (.Values.sigKey).secretName) }}
{{- if and (not (kindIs "invalid" (index $pair 1))) (ne (toString (index $pair 1)) "") }}{{ $set = append $set (index $pair 0) }}{{ end }}
{{- end }}
{{- if $set }}
{{- $which := ternary (printf "cloud is %q" (include "karpy.cloud" .)) (printf "cloudProvider is %q" $provider) (eq (toString .Values.cloudProvider) "") }}
{{- fail (printf "%s, but %s %s KakaoCloud's: set cloud=kakaocloud (or install the karpenter-provider-kakaocloud chart, charts/karpenter-provider-kakaocloud, whose cloud is kakaocloud)" $which (join ", " $set) (ternary "is" "are" (eq (len $set) 1))) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Values karpy's controller refuses (karpy_core/settings.py: KarpySettings.REFUSED,
UNIMPLEMENTED_GATES, AWS_GATES) fail here, naming the value, instead of crash-looping the pods.
tests/charts/test_helm.py checks this list against the settings module.
*/}}
{{- define "karpy.validate" -}}
{{- $s := .Values.settings }}
{{- include "karpy.validateCloud" . }}
{{- $gates := $s.featureGates | default dict }}
{{- $refused := list
  (list "settings.disableClusterStateObservability" (eq (toString $s.disableClusterStateObservability) "true") "karpy always publishes its cluster-state metrics")
  (list "settings.ignoreDRARequests" (eq (toString $s.ignoreDRARequests) "false") "karpy does not model DRA resource claims (only true is supported)")
  (list "logErrorOutputPaths" (ne (join "," (.Values.logErrorOutputPaths | default (list "stderr"))) "stderr") "Python's logging reports its own failures on stderr (only [stderr] is supported)")
}}
{{- if eq (include "karpy.provider" .) "aws" }}
{{- $refused = concat $refused (list
  (list "settings.enableZonalShift" (eq (toString $s.enableZonalShift) "true") "karpy does not read ARC zonal shifts")
  (list "settings.amiRefreshInterval" (not (has (toString ($s.amiRefreshInterval | default "1m")) (list "1m" "60s" "1m0s"))) "karpy re-resolves AMIs and subnets together every 1m (only 1m is supported)")
  (list "settings.subnetRefreshInterval" (not (has (toString ($s.subnetRefreshInterval | default "1m")) (list "1m" "60s" "1m0s"))) "karpy re-resolves AMIs and subnets together every 1m (only 1m is supported)")
  (list "settings.awsFeatureGates.nodeClassCEL" (eq (toString (($s.awsFeatureGates).nodeClassCEL)) "true") "karpy validates EC2NodeClasses with its own models, not CEL")
) }}
{{- end }}
{{- range $refused }}
{{- if index . 1 }}
{{- fail (printf "%s: this value is not supported by karpy: %s" (index . 0) (index . 2)) }}
{{- end }}
{{- end }}
{{- end }}
