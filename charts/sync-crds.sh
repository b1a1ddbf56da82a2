#!/usr/bin/env bash
# Copy the generated CRDs (crds/*.yaml, made from the pydantic models) into the chart's crds/
# directory, which Helm installs before the templates on first install.
#
#   charts/sync-crds.sh           # copy; removes chart CRDs that no longer exist in crds/
#   charts/sync-crds.sh --check   # change nothing; exit 1 and list the differences when stale
#
# Copies, not symlinks: `helm package` and OCI pushes of a chart directory must not depend on
# files outside it. tests/charts/test_helm.py fails when the copies are stale. Without --check the
# per-cloud charts are regenerated too (hack/charts.py).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
src="${repo}/crds"
dst="${repo}/charts/karpy/crds"
check=false
case "${1:-}" in
    --check) check=true ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

shopt -s nullglob
sources=("${src}"/*.yaml)
if ((${#sources[@]} == 0)); then
    echo "sync-crds: no CRDs in ${src} (generate them first)" >&2
    exit 1
fi

stale=0
mkdir -p "${dst}"
for f in "${sources[@]}"; do
    name="$(basename "${f}")"
    if ! cmp -s "${f}" "${dst}/${name}"; then
        stale=1
        if ${check}; then
            echo "sync-crds: charts/karpy/crds/${name} differs from crds/${name}" >&2
        else
            cp "${f}" "${dst}/${name}"
            echo "sync-crds: updated charts/karpy/crds/${name}"
        fi
    fi
done
for f in "${dst}"/*.yaml; do
    name="$(basename "${f}")"
    if [[ ! -e "${src}/${name}" ]]; then
        stale=1
        if ${check}; then
            echo "sync-crds: charts/karpy/crds/${name} has no crds/${name}" >&2
        else
            rm -f "${f}"
            echo "sync-crds: removed charts/karpy/crds/${name}"
        fi
    fi
done
if ${check} && ((stale)); then
    echo "sync-crds: the chart's CRDs are stale; run charts/sync-crds.sh" >&2
    exit 1
fi
if ! ${check}; then
    # the per-cloud charts (charts/karpenter, charts/karpenter-provider-kakaocloud) copy these CRDs
    "${PYTHON:-python3}" "${repo}/hack/charts.py"
fi
