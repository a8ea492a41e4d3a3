-- Lmod modulefile for iez (docs/install.md). Installed as share/modulefiles/iez/VERSION.lua with
-- /opt/iez replaced by the install prefix; add that share/modulefiles to MODULEPATH.
-- It sets paths only, no LD_PRELOAD: a preload in the login shell would reach every command.
-- Jobs get libiez from `iez run` or from the site's Slurm TaskProlog (share/iez/slurm).
whatis("Name: iez")
whatis("Description: an end-to-end I/O control plane for Lustre: libiez, iez-sim, iez-bench")
help([[
iez: libiez (LD_PRELOAD tracing and placement), iez-sim, iez-bench, iocop-client.
  iez --version            which libiez iez found
  iez run --app NAME -- srun ./app
  $IEZ_LIBDIR/libiez.so, $IEZ_LIBDIR/libiez-mpi.so for LD_PRELOAD by hand
]])
prepend_path("PATH", "/opt/iez/bin")
prepend_path("PKG_CONFIG_PATH", "/opt/iez/lib/pkgconfig")
setenv("IEZ_LIBDIR", "/opt/iez/lib/iez")
