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
exit 0
