#!/usr/bin/env bash
# The local base image for hosts that reach no container registry: a minimal Debian root
# filesystem (debootstrap, Debian packages only) with python3 and venv, imported with buildah.
# Usage: images/base/bootstrap.sh IMAGE_NAME   (root; `make base-image` calls it)
# Env: SUITE (bookworm), MIRROR (http://deb.debian.org/debian), BUILDAH (buildah command line).
set -euo pipefail
name=${1:?usage: bootstrap.sh IMAGE_NAME}
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
buildah=${BUILDAH:-buildah --storage-driver vfs}
rootfs=$(mktemp -d /var/tmp/autocomp-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT

debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  "$suite" "$rootfs" "$mirror"
# What a container runtime provides (/dev, /proc) or a base image never needs (apt caches,
# package lists, docs, man pages, locales other than C).
rm -rf "${rootfs:?}"/dev/* "$rootfs"/proc/* "$rootfs"/sys/* "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +

container=$($buildah from scratch)
$buildah copy --quiet "$container" "$rootfs" /
$buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 --cmd /bin/bash \
  --label org.opencontainers.image.description="debootstrap $suite minbase + python3, venv" \
  "$container"
$buildah commit --quiet --rm "$container" "$name"
$buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$name"
