# Turns the Python runner and its helper modules into a C++ source file holding
# each as a raw string literal. Run as:
#   cmake -DRUNNER=airlock_runner.py "-DHELPERS=a.py|b.py" -DOUTPUT=embedded_runner.cc -P embed_runner.cmake
# A helper's module name is its file name without .py; they are listed in the
# order the runner loads them (airlock_runner.py, "Helper modules").
string(REPLACE "|" ";" HELPERS "${HELPERS}")
set(delim "airlock_py9f3c")  # at most 16 characters (C++ raw string rule)
function(read_checked path out)
  file(READ "${path}" content)
  string(FIND "${content}" ")${delim}" found)
  if(NOT found EQUAL -1)
    message(FATAL_ERROR "${path} contains the raw string delimiter ')${delim}'; change it in embed_runner.cmake")
  endif()
  set(${out} "${content}" PARENT_SCOPE)
endfunction()

read_checked("${RUNNER}" runner)
set(helpers_cc "")
set(table "")
set(i 0)
foreach(helper IN LISTS HELPERS)
  read_checked("${helper}" content)
  get_filename_component(name "${helper}" NAME_WE)
  string(APPEND helpers_cc "constexpr char kHelper${i}[] = R\"${delim}(${content})${delim}\";\n")
  string(APPEND table "    {\"${name}\", std::string_view(kHelper${i}, sizeof kHelper${i} - 1)},\n")
  math(EXPR i "${i} + 1")
endforeach()

file(WRITE "${OUTPUT}.tmp"
  "// Generated from runtime/python/ by src/service/embed_runner.cmake. Do not edit.\n"
  "#include \"service/embedded_runner.h\"\n\n"
  "namespace airlock::service {\n\n"
  "namespace {\n"
  "constexpr char kRunner[] = R\"${delim}(${runner})${delim}\";\n"
  "${helpers_cc}"
  "constexpr exec::PythonModule kHelpers[] = {\n${table}};\n"
  "}  // namespace\n\n"
  "std::string_view EmbeddedRunner() { return std::string_view(kRunner, sizeof kRunner - 1); }\n\n"
  "std::span<const exec::PythonModule> EmbeddedRunnerHelpers() { return kHelpers; }\n\n"
  "}  // namespace airlock::service\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
