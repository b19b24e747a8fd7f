# Every dependency is a Debian 12 package (scripts/setup.sh installs them). Nothing is downloaded.
find_package(PkgConfig REQUIRED)
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)
# gzip request bodies (E2B's files.write({gzip: true})), inflated in src/model only
find_package(ZLIB REQUIRED)
if(AIRLOCK_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
