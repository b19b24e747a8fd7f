// The init program (init/main.cc) as bytes of the isolation library: a zygote
// writes them to a memfd and execs that for each warm run (init_image.h).
// AIRLOCK_INIT_PATH is the built program's path (CMakeLists.txt).
#include "base/embed_blob.inc"
AIRLOCK_EMBED_BLOB airlock_init_image, AIRLOCK_INIT_PATH
