// The runner's bytecode (compile_runner.py) as bytes of the service library:
// a cold run gets it as a file beside the source (embedded_runner.h).
// AIRLOCK_RUNNER_BYTECODE_PATH is the built blob's path (CMakeLists.txt).
#include "base/embed_blob.inc"
AIRLOCK_EMBED_BLOB airlock_runner_bytecode, AIRLOCK_RUNNER_BYTECODE_PATH
