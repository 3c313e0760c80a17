# Install rules and the .deb.
#
#   cmake --install build [--prefix DIR]      # or DESTDIR=... for a staged root
#   scripts/package_deb.sh                    # the .deb (prefix /usr, config in /etc)
#
# What lands where (prefix P, sysconfdir S = /etc when P is /usr, else P/etc):
#   P/bin/galleyd, P/bin/galleyctl                  the daemon and its admin tool
#   P/lib/systemd/system/galleyd.service            unprivileged unit (User=galley)
#   P/lib/sysusers.d/galley.conf                    the galley user and group
#   S/galley/galleyd.toml                           example config (a conffile in the .deb)
#   P/include/galley/*.h                            the C++ client's public headers
#   P/<libdir>/libgalley_client.so*                 the C++ client
#   P/<libdir>/cmake/galley/                        find_package(galley) -> galley::client
#   P/<libdir>/pkgconfig/galley.pc                  pkg-config --cflags --libs galley
#   P/share/doc/galley/                             README, LICENSE, CHANGELOG, docs
include(CMakePackageConfigHelpers)

set(GALLEY_FULL_SYSCONFDIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}")
set(GALLEY_FULL_DOCDIR "${CMAKE_INSTALL_FULL_DATAROOTDIR}/doc/galley")
set(GALLEY_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING
    "Where the systemd unit goes, relative to the prefix")
set(galley_cmake_dir "${CMAKE_INSTALL_LIBDIR}/cmake/galley")

# The C++ client: shared library, headers, CMake package, pkg-config file.
install(TARGETS galley_client_shared EXPORT galleyTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client
        NAMELINK_COMPONENT client)
install(FILES
          client/include/galley/batch.h
          client/include/galley/client.h
          client/include/galley/job_spec.h
          client/common/include/galley/sampling_policies.h
          client/common/include/galley/shard_members.h
          client/common/include/galley/status.h
          client/common/include/galley/tensor_format.h
          ${PROJECT_BINARY_DIR}/client/common/include/galley/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/galley COMPONENT client)
install(EXPORT galleyTargets NAMESPACE galley:: DESTINATION ${galley_cmake_dir}
        COMPONENT client)
configure_package_config_file(cmake/packaging/galleyConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/galleyConfig.cmake
                              INSTALL_DESTINATION ${galley_cmake_dir})
# 0.x: a minor release may change the API, so only the same minor matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/galleyConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/galleyConfig.cmake
              ${PROJECT_BINARY_DIR}/galleyConfigVersion.cmake
        DESTINATION ${galley_cmake_dir} COMPONENT client)
configure_file(cmake/packaging/galley.pc.in ${PROJECT_BINARY_DIR}/galley.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/galley.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT client)

# The daemon, its unit, its user and its example configuration.
if(GALLEY_BUILD_SERVER)
  install(TARGETS galleyd galleyctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          COMPONENT daemon)
  configure_file(scripts/galleyd.service.in ${PROJECT_BINARY_DIR}/galleyd.service @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/galleyd.service DESTINATION ${GALLEY_SYSTEMD_UNITDIR}
          COMPONENT daemon)
  install(FILES cmake/packaging/galley.sysusers DESTINATION lib/sysusers.d RENAME galley.conf
          COMPONENT daemon)
  install(FILES scripts/galleyd.toml DESTINATION ${GALLEY_FULL_SYSCONFDIR}/galley
          COMPONENT daemon)
endif()
install(FILES README.md LICENSE CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT daemon)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT daemon)

# CPack: one .deb holding all of the above.
set(CPACK_PACKAGE_NAME galley)
set(CPACK_PACKAGE_VENDOR "galley developers")
set(CPACK_PACKAGE_CONTACT "galley developers <galley@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_FILE_NAME "galley_${PROJECT_VERSION}_amd64")
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "per-node training-data service for deep learning\n galleyd reads, decodes and augments training images once per node and serves\n finished batches to every training job through shared memory; jobs over the\n same data share the work. Includes galleyctl, a systemd unit that runs as the\n unprivileged user galley, and the C++ client library with its CMake and\n pkg-config files.")
file(WRITE ${PROJECT_BINARY_DIR}/packaging/conffiles
     "${GALLEY_FULL_SYSCONFDIR}/galley/galleyd.toml\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/packaging/postinst
    ${PROJECT_SOURCE_DIR}/cmake/packaging/prerm
    ${PROJECT_BINARY_DIR}/packaging/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_SET_DESTDIR ON)
include(CPack)
