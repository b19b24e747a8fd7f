# Turns the console's static files (src/api/console/) into a C++ source file
# holding them as raw string literals: the console is part of the binary, and
# nothing is fetched from anywhere at run time.
# Run as: cmake -DDIR=src/api/console -DOUTPUT=console_assets.cc -P embed_console.cmake
set(delim "airlock_ui7c2e")
set(body "")
foreach(name index.html app.js app.css editor.js)
  file(READ "${DIR}/${name}" content)
  string(FIND "${content}" ")${delim}" found)
  if(NOT found EQUAL -1)
    message(FATAL_ERROR "${DIR}/${name} contains the raw string delimiter ')${delim}'; change it in embed_console.cmake")
  endif()
  string(MAKE_C_IDENTIFIER "${name}" id)
  string(APPEND body "constexpr char k_${id}[] = R\"${delim}(${content})${delim}\";\n")
endforeach()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from src/api/console/ by src/api/embed_console.cmake. Do not edit.\n"
  "#include \"api/console_routes.h\"\n\n"
  "namespace airlock::api {\n\n"
  "namespace {\n${body}}  // namespace\n\n"
  "std::string_view ConsoleFile(std::string_view name) {\n"
  "  if (name == \"index.html\") return std::string_view(k_index_html, sizeof k_index_html - 1);\n"
  "  if (name == \"app.js\") return std::string_view(k_app_js, sizeof k_app_js - 1);\n"
  "  if (name == \"app.css\") return std::string_view(k_app_css, sizeof k_app_css - 1);\n"
  "  if (name == \"editor.js\") return std::string_view(k_editor_js, sizeof k_editor_js - 1);\n"
  "  return {};\n"
  "}\n\n"
  "}  // namespace airlock::api\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
