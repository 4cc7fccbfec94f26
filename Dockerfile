# syntax=docker/dockerfile:1
# Lahar scheduler image: `docker build -t lahar:dev .`
#
# The builder turns the project and all its dependencies into wheels; the runtime stage
# installs those wheels offline and carries no compiler, no sources and no build cache.
# One image serves both `lahar run` (the Deployment) and `lahar node-agent` (the DaemonSet):
# the `nodeagent` extra brings gRPC, protobuf and NVML's bindings.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
COPY plugins ./plugins
COPY actions ./actions
RUN pip wheel --wheel-dir /wheels ".[nodeagent]"

FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The wheels are mounted for this one step only, so they never land in a layer.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels "lahar[nodeagent]" \
    && groupadd --system --gid 65532 lahar \
    && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin lahar
# Numeric so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
WORKDIR /tmp
# 8080: /metrics (--listen-address); 11251: /healthz and /readyz (--healthz-address).
EXPOSE 8080 11251
ENTRYPOINT ["lahar"]
CMD ["run"]
