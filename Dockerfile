# kubescale's image: `docker build -t kubescale:0.1.0 .` from the repository root.
#
# Two stages. The first builds kubescale's wheel and the wheels of its dependencies (aiohttp,
# kubernetes, cryptography, prometheus-client, numpy, PyYAML; binary wheels from the index, so
# no compiler is needed). The second installs only those wheels into a virtualenv on the same
# slim Python base — no pip cache, no sources, no tests, no build tools — and runs as an
# unprivileged user (65534, as manifests/base/deployment.yaml's runAsUser), so the image works
# with a read-only root filesystem: kubescale writes nothing but to /tmp (an emptyDir there).
#
# Reproducible: the base image is pinned by digest (a tag moves; refresh the digest with
# `docker buildx imagetools inspect python:3.11-slim-bookworm` when updating it, for every
# platform the release builds: the digest is the multi-platform index's) and every Python
# dependency by constraints.txt, so two builds of one tag install the same bytes.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY kubescale/ kubescale/
# kubescale/crds is a symlink to ../manifests/crds: the wheel takes the CRDs through it
COPY manifests/crds/ manifests/crds/
RUN python -m pip wheel --no-cache-dir --constraint constraints.txt --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/kubescale/bin:$PATH
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/kubescale \
    && /opt/kubescale/bin/pip install --no-cache-dir --no-index --find-links=/wheels kubescale \
    && /opt/kubescale/bin/pip uninstall --yes pip \
    && kubescale --help >/dev/null
USER 65534:65534
# 8000: the TLS port (webhook, scheduler extender); 8944: /healthz, /readyz, /metrics
EXPOSE 8000 8944
ENTRYPOINT ["kubescale"]
CMD ["serve"]
