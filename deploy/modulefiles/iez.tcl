#%Module1.0
## Environment Modules (Tcl) modulefile for iez: the same as iez.lua, for sites without Lmod.
## Installed as share/modulefiles/iez/VERSION with /opt/iez replaced by the install prefix.
module-whatis "iez: an end-to-end I/O control plane for Lustre: libiez, iez-sim, iez-bench"
proc ModulesHelp { } {
    puts stderr "iez: libiez (LD_PRELOAD tracing and placement), iez-sim, iez-bench, iocop-client."
    puts stderr "  iez --version; iez run --app NAME -- srun ./app; \$IEZ_LIBDIR/libiez.so"
}
prepend-path PATH /opt/iez/bin
prepend-path PKG_CONFIG_PATH /opt/iez/lib/pkgconfig
setenv IEZ_LIBDIR /opt/iez/lib/iez
