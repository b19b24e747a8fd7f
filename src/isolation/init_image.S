// The init program (init/main.cc) as bytes of the isolation library: a zygote
// writes them to a memfd and execs that for each warm run (init_image.h).
// AIRLOCK_INIT_PATH is the built program's path (CMakeLists.txt).
  .section .rodata.airlock_init_image, "a"
  .balign 16
  .globl airlock_init_image_begin
airlock_init_image_begin:
  .incbin AIRLOCK_INIT_PATH
  .globl airlock_init_image_end
airlock_init_image_end:
  .byte 0
  .section .note.GNU-stack, "", @progbits
