# The host install without containers (docs/deploy.md): `cpack -G DEB` in the
# build directory (scripts/deb.sh) makes airlock_<version>_<arch>.deb with the
# binary (/usr/bin/airlock), the profiles (/usr/share/airlock/profiles, where an
# installed binary looks: profile::DefaultProfilesDir), the entrypoint that turns
# AIRLOCK_* variables into flags, and airlock.service with /etc/default/airlock.
# The Containerfile's runtime stage installs this same package.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/deploy/entrypoint.sh DESTINATION lib/airlock RENAME entrypoint)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/airlock.service DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/default DESTINATION /etc/default RENAME airlock)
install(FILES ${PROJECT_SOURCE_DIR}/docs/deploy.md ${PROJECT_SOURCE_DIR}/docs/security.md
        DESTINATION share/doc/airlock)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME airlock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "airlock maintainers <airlock@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "runs untrusted (LLM-written) Python in a kernel sandbox, over HTTP")
set(CPACK_PACKAGE_DESCRIPTION
    "Namespaces, a pivot_root'd read-only filesystem, cgroups, dropped capabilities, Landlock and a\n"
    "seccomp allowlist around every run; a warm pool of zygotes; the fips-agents sidecar's HTTP API.")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Sandboxed programs run Debian's python3; the profiles import these modules.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3, python3-numpy, python3-pandas, python3-scipy, python3-matplotlib")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
    ${PROJECT_SOURCE_DIR}/deploy/debian/postrm
    ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
