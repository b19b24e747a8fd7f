// The runner's bytecode (compile_runner.py) as bytes of the service library:
// a cold run gets it as a file beside the source (embedded_runner.h).
// AIRLOCK_RUNNER_BYTECODE_PATH is the built blob's path (CMakeLists.txt).
  .section .rodata.airlock_runner_bytecode, "a"
  .balign 16
  .globl airlock_runner_bytecode_begin
airlock_runner_bytecode_begin:
  .incbin AIRLOCK_RUNNER_BYTECODE_PATH
  .globl airlock_runner_bytecode_end
airlock_runner_bytecode_end:
  .byte 0
  .section .note.GNU-stack, "", @progbits
