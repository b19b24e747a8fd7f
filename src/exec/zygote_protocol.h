// The messages between the server's warm pool (warm_pool.h) and a zygote
// (zygote_main.h), over a SOCK_SEQPACKET pair (fd 3 of the zygote). Every
// message starts with one type byte; text follows where noted.
//
//   zygote -> server  kUp            the interpreter is ready, modules imported;
//                                     text: import failures, one per line (may be empty);
//                                     SCM_RIGHTS: the zygote's own pidfd
//   server -> zygote  kSpawn         make one run; text: the run's own host id in
//                                     decimal (isolation/host_ids.h: its user namespace
//                                     is owned by it, its uid/gid 1000 is it), or
//                                     empty: the zygote's own ids (a server not root)
//   zygote -> server  kSpawned       one run was cloned; text: its host id as asked
//                                     (empty when none); SCM_RIGHTS carries, in
//                                     order, kSpawnedFds fds: the run's init pidfd,
//                                     stdout, stderr, status and result-channel read
//                                     ends, and the server's end of the run's control
//                                     socket (warm_run.h: the kWarmGo/kWarmReady handshake)
//   zygote -> server  kFailed        text: what failed (startup or one spawn)
//
// Then, on a run's control socket, the request: an 8-byte little-endian
// length and that many bytes of runner config JSON with the code inline.
#pragma once

#include <cstddef>
#include <cstdint>

namespace airlock::exec::zygote {

inline constexpr char kUp = 'U';
inline constexpr char kSpawn = 'S';
inline constexpr char kSpawned = 'O';
inline constexpr char kFailed = 'F';

inline constexpr int kSpawnedFds = 6;
inline constexpr int kControlFd = 3;  // the zygote's end of the pool socket

// A request larger than this is refused by the run (the server never sends one:
// code is capped far below).
inline constexpr uint64_t kMaxRequestBytes = uint64_t{256} << 20;

}  // namespace airlock::exec::zygote
