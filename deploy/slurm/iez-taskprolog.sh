#!/bin/bash
# Slurm TaskProlog for site-wide iez tracing (docs/install.md, "Slurm"). slurmstepd runs it as the
# job's user before each task and turns the `export NAME=VALUE` lines it prints into the task's
# environment: libiez preloaded, the run traced into IEZ_SITE_TRACE_ROOT/JOBID/APP, which
# iez-epilog.sh uploads to the controller after the job. Placement follows the plan a job asks
# for (IEZ_PLAN, or `iez run`, whose own settings win: a task that already preloads libiez is
# left alone). A job opts out with IEZ_SITE=off in its environment.
# Never fails the task: anything missing prints nothing, and the task runs without iez.
conf=${IEZ_SITE_CONF:-/etc/iez/slurm.env}   # site settings, read if present (see slurm.conf.example)
# shellcheck disable=SC1090
[ -r "$conf" ] && . "$conf"
libdir=${IEZ_SITE_LIBDIR:-/opt/iez/lib/iez}
root=${IEZ_SITE_TRACE_ROOT:-}

[ "${IEZ_SITE:-on}" = off ] && exit 0
[ -n "$root" ] && [ -n "${SLURM_JOB_ID:-}" ] || exit 0
case " ${LD_PRELOAD//:/ } " in */libiez.so\ *|*/libiez-mpi.so\ *) exit 0 ;; esac

# libiez-mpi.so serves MPI and non-MPI tasks alike when MPI is MPICH-ABI (docs/libiez.md, "MPI");
# a site on Open MPI sets IEZ_SITE_LIB=libiez.so and leaves MPI-IO to `iez run`.
lib=$libdir/${IEZ_SITE_LIB:-libiez-mpi.so}
[ -r "$lib" ] || lib=$libdir/libiez.so
[ -r "$lib" ] || exit 0

# The application name the controller takes: 1-128 of [A-Za-z0-9._+-], starting alphanumeric.
app=${IEZ_APP:-${SLURM_JOB_NAME:-job}}
app=${app//[^A-Za-z0-9._+-]/_}
app=${app#"${app%%[A-Za-z0-9]*}"}
app=${app:0:128}
[ -n "$app" ] || app=job

echo "export LD_PRELOAD=$lib${LD_PRELOAD:+ $LD_PRELOAD}"
echo "export IEZ_APP=$app"
echo "export IEZ_RUN=$SLURM_JOB_ID"
[ -n "${IEZ_TRACE_DIR:-}" ] || echo "export IEZ_TRACE_DIR=$root/$SLURM_JOB_ID/$app"

# Placement: with a controller configured and no plan of the job's own, the first task on each
# node fetches the application's plan (never waiting for one being made: the job does not wait)
# into a directory of the user's own; the other tasks take the same file. The run number goes
# beside the trace, for iez-epilog.sh's upload (--run). No plan: the run is traced only.
iez=${IEZ_SITE_IEZ:-/opt/iez/bin/iez}
[ -n "${IEZ_CONTROLLER:-}" ] && [ -z "${IEZ_PLAN:-}" ] && [ -x "$iez" ] || exit 0
dir=${TMPDIR:-/tmp}/iez-plan.$SLURM_JOB_ID.$(id -u)
mkdir -m 700 "$dir" 2>/dev/null
# Only a directory this user owns, not a link another user planted.
[ -d "$dir" ] && [ ! -L "$dir" ] && [ -O "$dir" ] || exit 0
(
    flock -w 60 9 || exit 0
    [ -e "$dir/plan" ] || [ -e "$dir/none" ] && exit 0
    if run=$(timeout "${IEZ_SITE_FETCH_TIMEOUT:-20}" env IEZ_CONTROLLER="$IEZ_CONTROLLER" \
            IEZ_TOKEN_FILE="${IEZ_TOKEN_FILE:-/etc/iez/site.token}" "$iez" trace fetch-plan --app "$app" -o "$dir/plan" 2>/dev/null); then
        [[ $run =~ ^[0-9]+$ ]] && mkdir -p "$root/$SLURM_JOB_ID" && echo "$run" > "$root/$SLURM_JOB_ID/$app.run"
    else
        rm -f "$dir/plan"; : > "$dir/none"
    fi
) 9> "$dir/lock" 2>/dev/null
if [ -s "$dir/plan" ]; then
    echo "export IEZ_PLAN=$dir/plan"
    echo "export IEZ_MODE=trace,place"
fi
exit 0
