#!/usr/bin/env bash
# Build (once) and run a pinned Helm, from the Go module proxy.
#
#   hack/helm.sh lint charts/karpy
#   hack/helm.sh template karpy charts/karpy --set cloud=aws
#   hack/helm.sh --path        # build if needed, print the binary's path, run nothing
#
# The binary is cached outside the repo, in
#   ${KARPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpy}/bin/helm-<version>/helm
# so only the first call pays for the build (measured cold: 9.6 minutes on 2 cores at load average 8-16).
# HELM_VERSION overrides the pinned version. A `helm` already on PATH is NOT used:
# the tests want one known version everywhere.
#
# Exit status 3 with a message on stderr when the binary is not cached and there
# is no Go toolchain to build it (the chart tests turn that into a loud skip).
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CACHE_DIR="${KARPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpy}"
BIN_DIR="${CACHE_DIR}/bin/helm-${HELM_VERSION}"
HELM="${BIN_DIR}/helm"

build() {
    if ! command -v go >/dev/null 2>&1; then
        echo "hack/helm.sh: helm ${HELM_VERSION} is not cached at ${HELM} and there is no Go toolchain (go) on PATH to build it" >&2
        exit 3
    fi
    mkdir -p "${BIN_DIR}"
    # One builder at a time (parallel test workers); the others wait and reuse its result.
    exec 9>"${BIN_DIR}.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9
    fi
    if [[ -x "${HELM}" ]]; then
        return 0
    fi
    local start=${SECONDS}
    echo "hack/helm.sh: building helm ${HELM_VERSION} with $(go version | cut -d' ' -f3) into ${BIN_DIR} (first run only)" >&2

    # Helm's Makefile stamps the Kubernetes version it was built against (used for
    # .Capabilities.KubeVersion and lint's deprecation checks) from its client-go
    # dependency, v0.N.x -> 1.N. Do the same, or `helm template` claims Kubernetes 1.20.
    local gomod k8s_minor ldflags
    gomod="$(go mod download -json "helm.sh/helm/v3@${HELM_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
    k8s_minor="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "${gomod}" | head -n1)"
    ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
    if [[ -n "${k8s_minor}" ]]; then
        for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
            ldflags+=" -X ${pkg}.k8sVersionMajor=1 -X ${pkg}.k8sVersionMinor=${k8s_minor}"
        done
    fi

    # Build into a scratch dir and rename: a killed build never leaves a half-written helm.
    local tmp
    tmp="$(mktemp -d "${BIN_DIR}/.build.XXXXXX")"
    if ! GOBIN="${tmp}" CGO_ENABLED=0 GO111MODULE=on \
        go install -trimpath -ldflags "${ldflags}" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" >&2; then
        rm -rf "${tmp}"
        echo "hack/helm.sh: building helm ${HELM_VERSION} failed" >&2
        exit 1
    fi
    mv -f "${tmp}/helm" "${HELM}"
    rm -rf "${tmp}"
    echo "hack/helm.sh: built ${HELM} in $((SECONDS - start))s" >&2
}

if [[ ! -x "${HELM}" ]]; then
    build
fi

if [[ "${1:-}" == "--path" ]]; then
    echo "${HELM}"
    exit 0
fi
exec "${HELM}" "$@"
