#!/bin/sh
# The compose file's one-shot `secrets` service: every key and token the stack needs,
# written once into one volume per service that needs them, and kept (a later `up` finds
# them and writes nothing). It runs in switchboard's image as root only to hand each
# volume to the user of the service that reads it; no secret is printed, put on a
# command line or baked into an image.
#
#   /secrets/control     (uid 10001)  control.secret, control.public, authorised_keys,
#                                     stack.key, admin.toml (the admin tokens),
#                                     operator.token, viewer.token
#   /secrets/worker      (uid 10001)  workers.secret, workers.public, control.public,
#                                     stack.key
#   /secrets/prometheus  (uid 65534)  viewer.token (the scrape's bearer token)
#   /secrets/grafana     (uid 472)    admin.password (GF_SECURITY_ADMIN_PASSWORD__FILE)
#
# Every worker replica is one worker host that shares the `workers` key pair; their
# workers' ids differ by container host name. See docs/deploy.md, section 7.
set -eu
umask 077

control=/secrets/control
worker=/secrets/worker
prometheus=/secrets/prometheus
grafana=/secrets/grafana

# podman starts a service's dependencies again with the service, so this runs once per
# dependent: once everything is written, write nothing (a service may be reading it).
if [ -e "$control/.complete" ]; then
    echo "secrets: kept from an earlier start"
    exit 0
fi

# A random token (letters and digits), read by the shell: it never reaches a command line.
token() {
    python3 -c 'import secrets; print(secrets.token_hex(24))'
}

if [ ! -e "$control/control.secret" ]; then
    switchboard keys generate control --dir "$control"
fi
if [ ! -e "$worker/workers.secret" ]; then
    switchboard keys generate workers --dir "$worker"
fi
if [ ! -e "$control/stack.key" ]; then
    switchboard keys stack "$control/stack.key"
fi
cp "$control/stack.key" "$worker/stack.key"
cp "$control/control.public" "$worker/control.public"
{
    echo "# worker hosts let in by the gateway: every replica of the worker service"
    cat "$worker/workers.public"
} > "$control/authorised_keys"

if [ ! -e "$control/admin.toml" ]; then
    operator=$(token)
    viewer=$(token)
    printf '%s\n' "$operator" > "$control/operator.token"
    printf '%s\n' "$viewer" > "$control/viewer.token"
    # The admin app reads its tokens from this file (--config), never from its environment
    # or command line; Prometheus scrapes /metrics with the viewer token.
    printf 'admin_operator_tokens = "operator:%s"\nadmin_viewer_tokens = "prometheus:%s"\n' \
        "$operator" "$viewer" > "$control/admin.toml"
fi
cp "$control/viewer.token" "$prometheus/viewer.token"
if [ ! -e "$grafana/admin.password" ]; then
    token > "$grafana/admin.password"
fi

chown -R 10001:10001 "$control" "$worker"
chown -R 65534:65534 "$prometheus"
chown -R 472:0 "$grafana"
chmod 700 "$control" "$worker" "$prometheus" "$grafana"
touch "$control/.complete"
echo "secrets: ready (control, worker, prometheus, grafana volumes)"
