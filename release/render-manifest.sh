#!/bin/sh
# kubescale.yaml, the release manifest: everything `kubectl apply -k manifests/` installs (the
# CRDs, RBAC, Service, Deployment with self-managed certificates, PodDisruptionBudget) as one
# file, with the Deployment's image set to the release's.
#
#   release/render-manifest.sh VERSION [IMAGE] > kubescale.yaml
#
# IMAGE defaults to the one the manifests name (ghcr.io/kubescale/kubescale). $KUBECTL (default
# kubectl) renders it with its built-in kustomize. .github/workflows/release.yml runs this on
# each version tag; tests/manifests/test_release.py renders it and applies the result.
set -eu
version=${1:?usage: render-manifest.sh VERSION [IMAGE]}
image=${2:-ghcr.io/kubescale/kubescale}
case $version in
  *[!0-9A-Za-z.+-]* | "") echo "render-manifest.sh: VERSION '$version' is not a version" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cp -R "$root/manifests" "$work/manifests"
cat >>"$work/manifests/kustomization.yaml" <<END
images:
- name: ghcr.io/kubescale/kubescale
  newName: $image
  newTag: "$version"
END
"${KUBECTL:-kubectl}" kustomize "$work/manifests"
