# `cmake --install build [--prefix DIR]` and `cpack` (docs/install.md): what a site installs.
#   bin/                       iez-sim, iez-bench, iocop-client, liopprof-rpctrace, iez-probe
#   lib/iez/                   libiez.so, libiez-mpi.so, libliopprof.so, libiocop.a (IEZ_INSTALL_LIBDIR)
#   include/iez/               iez.h, iocop.h
#   lib/pkgconfig/             iez.pc, iez-mpi.pc, iocop.pc
#   share/modulefiles/iez/     VERSION.lua (Lmod) and VERSION (Tcl environment modules)
#   share/iez/{systemd,slurm}/ the unit files and Slurm scripts of deploy/, paths set to the prefix
# The libraries go into a directory of their own: they are LD_PRELOAD libraries with unversioned
# names, not for the default linker path or ldconfig; iez finds them there (iez.artifacts).
include(GNUInstallDirs)
set(IEZ_INSTALL_LIBDIR "${CMAKE_INSTALL_LIBDIR}/iez" CACHE STRING "where libiez*.so go, relative to the prefix")

install(TARGETS iez liopprof iocop
        LIBRARY DESTINATION ${IEZ_INSTALL_LIBDIR} ARCHIVE DESTINATION ${IEZ_INSTALL_LIBDIR})
if(TARGET iez-mpi)
  install(TARGETS iez-mpi LIBRARY DESTINATION ${IEZ_INSTALL_LIBDIR})
endif()
# Installed programs keep the link directories outside the system's (Debian's MPICH HDF5 lives in
# lib/x86_64-linux-gnu/hdf5/mpich), as their RUNPATH.
set_target_properties(iez-sim iez-bench PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS iez-sim iez-bench iocop-client liopprof-rpctrace iez-probe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES libiez/include/iez.h iocop/iocop.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/iez)

# pkg-config files: prefix=/opt/iez in the configured file, set to the real prefix at install
# (below), so `cmake --install --prefix`, DESTDIR and cpack all get a file naming their prefix.
set(IEZ_PKGCONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(IEZ_PC_FILES iez iocop)
if(TARGET iez-mpi)
  list(APPEND IEZ_PC_FILES iez-mpi)
endif()

# Text files that name installed paths are written at install time, when the prefix is known
# (`--prefix` may differ from the configured one): the repository's files name /opt/iez, the
# layout docs/install.md recommends, and are rewritten to the actual directories.
function(iez_install_rewritten src dest_dir)  # src: absolute, or relative to the source tree
  get_filename_component(src ${src} ABSOLUTE BASE_DIR ${PROJECT_SOURCE_DIR})
  get_filename_component(name ${src} NAME)
  if(ARGC GREATER 2)
    set(name ${ARGV2})
  endif()
  install(CODE "
    set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
    file(READ \"${src}\" text)
    string(REPLACE \"/opt/iez/lib/iez\" \"\${prefix}/${IEZ_INSTALL_LIBDIR}\" text \"\${text}\")
    string(REPLACE \"/opt/iez/lib/pkgconfig\" \"\${prefix}/${IEZ_PKGCONFIG_DIR}\" text \"\${text}\")
    string(REPLACE \"/opt/iez/bin\" \"\${prefix}/${CMAKE_INSTALL_BINDIR}\" text \"\${text}\")
    string(REPLACE \"/opt/iez\" \"\${prefix}\" text \"\${text}\")
    set(out \"\$ENV{DESTDIR}\${prefix}/${dest_dir}/${name}\")
    message(STATUS \"Installing: \${out}\")
    file(WRITE \"\${out}\" \"\${text}\")
    list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${out}\")
    if(\"${name}\" MATCHES \"[.]sh$\")
      file(CHMOD \"\${out}\" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
           WORLD_READ WORLD_EXECUTE)
    endif()
  ")
endfunction()

foreach(pc ${IEZ_PC_FILES})
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc @ONLY)
  iez_install_rewritten(${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc ${IEZ_PKGCONFIG_DIR})
endforeach()
iez_install_rewritten(deploy/modulefiles/iez.lua ${CMAKE_INSTALL_DATADIR}/modulefiles/iez ${PROJECT_VERSION}.lua)
iez_install_rewritten(deploy/modulefiles/iez.tcl ${CMAKE_INSTALL_DATADIR}/modulefiles/iez ${PROJECT_VERSION})
foreach(unit iez-controller.service iez-collect@.service iez-access.service)
  iez_install_rewritten(deploy/systemd/${unit} ${CMAKE_INSTALL_DATADIR}/iez/systemd)
endforeach()
foreach(file iez-taskprolog.sh iez-epilog.sh slurm.conf.example)
  iez_install_rewritten(deploy/slurm/${file} ${CMAKE_INSTALL_DATADIR}/iez/slurm)
endforeach()
install(FILES deploy/iez.env.example DESTINATION ${CMAKE_INSTALL_DATADIR}/iez)

# `make deb` (cpack -G DEB): the C half for compute and server nodes, in /opt/iez, where the
# Python half goes as a venv (`python3 -m venv /opt/iez`): one prefix, nothing to set.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME iez)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "iez maintainers <iez@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "iez: libiez (LD_PRELOAD tracing and placement for Lustre), iez-sim, iez-bench")
set(CPACK_PACKAGING_INSTALL_PREFIX /opt/iez)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "mpich, python3-venv")
include(CPack)
