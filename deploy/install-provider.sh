#!/bin/sh
# Installs karpy and one cloud provider plugin into the virtualenv of deploy/Dockerfile's build
# stage, and fails when the CLI or the plugin cannot be loaded.
#
#   install-provider.sh [--dry-run | --check-only] CLOUD PROVIDER PROVIDER_PACKAGE
#
# CLOUD             karpy's own cloud whose plugin (its distribution in ./providers/CLOUD, karpy-CLOUD)
#                   is installed when PROVIDER_PACKAGE is empty: aws or kakaocloud
# PROVIDER          name of the plugin (its `karpy.cloudprovider` entry point); empty: CLOUD
# PROVIDER_PACKAGE  pip requirement(s) of a third-party provider, installed beside karpy, e.g.
#                   "karpy-provider-example==1.2.0" or "./providers/example" (the build context
#                   holds providers/); empty: karpy's own plugin "./providers/CLOUD"
#
# --dry-run prints "provider=<name>" and the pip command and stops; --check-only skips the
# install and only checks that the plugin loads (tests/charts/test_dockerfile.py runs both).
# PYTHON (default /opt/karpy/bin/python) is the interpreter of the target virtualenv.
set -eu

mode=install
case "${1:-}" in
    --dry-run) mode=dry-run; shift ;;
    --check-only) mode=check; shift ;;
esac
[ "$#" -eq 3 ] || { echo "usage: $0 [--dry-run|--check-only] CLOUD PROVIDER PROVIDER_PACKAGE" >&2; exit 2; }
cloud=$1
provider=${2:-$1}
package=$3
python=${PYTHON:-/opt/karpy/bin/python}

case "$provider" in
    ''|*[!a-z0-9._-]*) echo "PROVIDER must be a plugin name ([a-z0-9._-]), not '$provider'" >&2; exit 1 ;;
esac
if [ -z "$package" ]; then
    case "$cloud" in
        aws|kakaocloud) ;;
        *) echo "CLOUD must be aws or kakaocloud, not '$cloud' (a third-party provider sets PROVIDER_PACKAGE)" >&2; exit 1 ;;
    esac
    if [ "$provider" != "$cloud" ]; then
        echo "PROVIDER=$provider needs PROVIDER_PACKAGE (the pip requirement that provides it)" >&2
        exit 1
    fi
    # the plugin from the build context, exactly as a third party's: only this cloud's package
    requirements=". ./providers/$cloud"
else
    requirements=". $package"
fi

if [ "$mode" = dry-run ]; then
    echo "provider=$provider"
    echo "pip install --prefer-binary $requirements"
    exit 0
fi

if [ "$mode" = install ]; then
    # $requirements is split on purpose: karpy itself and the provider's requirement(s).
    # shellcheck disable=SC2086
    "$python" -m pip install --prefer-binary $requirements
    "$python" -m compileall -q "$(dirname "$(dirname "$python")")/lib"
    "$python" -m pip check
    # The simulator's plotting library stays out of the controller image.
    "$python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('matplotlib') is not None)"
    "$(dirname "$python")/karpy" --help >/dev/null
fi

"$python" - "$provider" <<'PY'
import sys
from importlib.metadata import entry_points

name = sys.argv[1]
found = [ep for ep in entry_points(group="karpy.cloudprovider") if ep.name == name]
if not found:
    names = sorted({ep.name for ep in entry_points(group="karpy.cloudprovider")})
    sys.exit(f"no karpy.cloudprovider entry point {name!r} is installed (installed: {', '.join(names)})")
if not callable(found[0].load()):
    sys.exit(f"entry point {name!r} is not callable")
print(f"provider {name}: {found[0].value}")
PY
