#!/bin/bash
# Slurm Epilog for site-wide iez tracing (docs/install.md, "Slurm"): after a job, on its first
# node only, uploads each trace iez-taskprolog.sh directed into IEZ_SITE_TRACE_ROOT/JOBID/APP to
# the controller, as the job's user (the trace is the user's; the site token must be readable by
# the users' group, as for `iez run`), then removes it. slurmd runs it as root. It always exits 0:
# a failing Epilog would drain the node. Failures go to syslog (tag iez-epilog), and the trace stays
# for `iez trace upload DIR --app APP`.
conf=${IEZ_SITE_CONF:-/etc/iez/slurm.env}
# shellcheck disable=SC1090
[ -r "$conf" ] && . "$conf"
root=${IEZ_SITE_TRACE_ROOT:-}
iez=${IEZ_SITE_IEZ:-/opt/iez/bin/iez}
job=${SLURM_JOB_ID:-}
[ -n "$root" ] && [[ $job =~ ^[0-9]+(_[0-9]+)?$ ]] && [ -d "$root/$job" ] || exit 0

log() { logger -t iez-epilog -- "job $job: $*" 2>/dev/null || echo "iez-epilog: job $job: $*" >&2; }

first=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | head -n 1)
[ -z "$first" ] || [ "$first" = "${SLURMD_NODENAME:-$(hostname -s)}" ] || exit 0

as_user=()
if [ "$(id -u)" = 0 ] && [ -n "${SLURM_JOB_UID:-}" ]; then
    as_user=(setpriv --reuid="$SLURM_JOB_UID" --regid="${SLURM_JOB_GID:-$SLURM_JOB_UID}" --init-groups)
fi
ok=1
for dir in "$root/$job"/*/; do
    [ -d "$dir" ] && [ ! -L "${dir%/}" ] || continue
    app=$(basename "$dir")
    [[ $app =~ ^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$ ]] || { log "skipped $dir: not an application name"; continue; }
    # the planned run it traced, when iez-taskprolog.sh fetched a plan for it
    run=()
    [ -f "$root/$job/$app.run" ] && [ ! -L "$root/$job/$app.run" ] && read -r n < "$root/$job/$app.run" && [[ $n =~ ^[0-9]{1,9}$ ]] && run=(--run "$n")
    if out=$("${as_user[@]}" env -i PATH=/usr/bin:/bin HOME=/ IEZ_CONTROLLER="${IEZ_CONTROLLER:-}" \
            IEZ_TOKEN_FILE="${IEZ_TOKEN_FILE:-/etc/iez/site.token}" \
            timeout "${IEZ_SITE_UPLOAD_TIMEOUT:-120}" "$iez" trace upload "$dir" --app "$app" "${run[@]}" 2>&1); then
        log "uploaded $app: $out"
    else
        ok=0
        log "not uploaded, kept in $dir (retry: iez trace upload $dir --app $app): ${out//$'\n'/ }"
    fi
done
[ "$ok" = 1 ] && "${as_user[@]}" rm -rf -- "${root:?}/$job"
exit 0
