#!/usr/bin/env bash
# Make the files this overlay's secretGenerator reads, in ./secrets (mode 700), once:
#
#   deploy/k8s/overlays/example/make-secrets.sh        (SWITCHBOARD: the command to run,
#                                                       default `switchboard`)
#
# CURVE key pairs for the control and the worker pods and the stack key, with
# `switchboard keys generate` / `switchboard keys stack`; the admin tokens with openssl.
# Nothing is printed and no existing file is overwritten (the commands refuse).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
switchboard=${SWITCHBOARD:-switchboard}
out=$here/secrets
mkdir -m 700 "$out"
umask 077

$switchboard keys generate control --dir "$out"
$switchboard keys generate workers --dir "$out"
$switchboard keys stack "$out/stack.key"
# The gateway lets in the worker pods' key alone.
cp "$out/workers.public" "$out/authorised_keys"

# No trailing newline: each file becomes one environment variable's value.
prestop=$(openssl rand -hex 32)
printf 'prestop:%s,ops:%s' "$prestop" "$(openssl rand -hex 32)" > "$out/operator-tokens"
printf '%s' "$prestop" > "$out/prestop-token"
prometheus=$(openssl rand -hex 32)
printf 'prometheus:%s' "$prometheus" > "$out/viewer-tokens"
printf '%s' "$prometheus" > "$out/prometheus-token"
echo "made $out"
