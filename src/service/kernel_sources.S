// The context kernels (runtime/<language>/, service/kernels.h) as bytes of the
// service library. Each AIRLOCK_KERNEL_*_PATH is a source file's path
// (CMakeLists.txt).
#include "base/embed_blob.inc"
AIRLOCK_EMBED_BLOB airlock_kernel_javascript, AIRLOCK_KERNEL_JAVASCRIPT_PATH
AIRLOCK_EMBED_BLOB airlock_kernel_r, AIRLOCK_KERNEL_R_PATH
AIRLOCK_EMBED_BLOB airlock_kernel_java, AIRLOCK_KERNEL_JAVA_PATH
AIRLOCK_EMBED_BLOB airlock_kernel_bash, AIRLOCK_KERNEL_BASH_PATH
