# Warnings as errors on our own code only (third-party headers are included as SYSTEM).
function(airlock_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>
                         -Wnon-virtual-dtor -Wformat=2 -Wno-missing-field-initializers)
endfunction()

# airlock_library(NAME SOURCES... DEPS ...): one static library per src/ folder.
function(airlock_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(airlock_${name} STATIC ${ARG_SOURCES})
  add_library(airlock::${name} ALIAS airlock_${name})
  target_include_directories(airlock_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(airlock_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  airlock_warnings(airlock_${name})
endfunction()
