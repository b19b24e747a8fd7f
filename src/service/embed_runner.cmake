# Turns the Python runner into a C++ source file holding it as a raw string
# literal. Run as: cmake -DINPUT=airlock_runner.py -DOUTPUT=embedded_runner.cc -P embed_runner.cmake
file(READ "${INPUT}" content)
set(delim "airlock_py9f3c")  # at most 16 characters (C++ raw string rule)
string(FIND "${content}" ")${delim}" found)
if(NOT found EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter ')${delim}'; change it in embed_runner.cmake")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from runtime/python/airlock_runner.py by src/service/embed_runner.cmake. Do not edit.\n"
  "#include \"service/embedded_runner.h\"\n\n"
  "namespace airlock::service {\n\n"
  "namespace {\n"
  "constexpr char kRunner[] = R\"${delim}(${content})${delim}\";\n"
  "}  // namespace\n\n"
  "std::string_view EmbeddedRunner() { return std::string_view(kRunner, sizeof kRunner - 1); }\n\n"
  "}  // namespace airlock::service\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
