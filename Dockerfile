# syntax=docker/dockerfile:1
# The function image, as crossplane/function-template-python builds it: a wheel built with
# hatch in a Debian stage, installed into a venv that is copied into distroless Python.

FROM debian:12-slim AS build
RUN --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    rm -f /etc/apt/apt.conf.d/docker-clean && \
    apt-get update && \
    apt-get install --no-install-recommends --yes python3-venv

# No .pyc files: nothing would persist them across container restarts.
ENV PYTHONDONTWRITEBYTECODE=true

WORKDIR /build
RUN --mount=target=. \
    --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /venv/build && \
    /venv/build/bin/pip install hatch && \
    /venv/build/bin/hatch build -t wheel /whl

# Only the function and its runtime dependencies: the wheel carries function/ alone (not the
# dot_inference/ tooling, nor the render/KCL extras); its dev-only console script goes too.
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /venv/fn && \
    /venv/fn/bin/pip install /whl/*.whl && \
    rm /venv/fn/bin/dot-inference

# Same venv path as in the build stage, so shebangs and symlinks keep working.
FROM gcr.io/distroless/python3-debian12 AS image
WORKDIR /
COPY --from=build /venv/fn /venv/fn
EXPOSE 9443
USER nonroot:nonroot
ENTRYPOINT ["/venv/fn/bin/function"]
