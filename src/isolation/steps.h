// Internal to isolation/: the steps of a sandboxed process's setup, reported
// to the parent on failure as (step, errno); names in kStepNames (sandbox.cc).
// C only: the init program uses them too (spawn_service.h).
#pragma once

namespace airlock::isolation::internal {

enum Step : int {
  kStepSync = 1,
  kStepCgroupNs,
  kStepSetgroups,
  kStepSetgid,
  kStepSetuid,
  kStepCaps,
  kStepHostname,
  kStepMountPrivate,
  kStepMountRoot,
  kStepMountOp,
  kStepPivotRoot,
  kStepRemountRoot,
  kStepFork,
  kStepSetsid,
  kStepFds,
  kStepRlimits,
  kStepChdir,
  kStepSecurebits,
  kStepCapsDrop,
  kStepNoNewPrivs,
  kStepLandlock,
  kStepSeccomp,
  kStepExec,
  kStepReady,  // a warm run could not tell its zygote's server that it is ready
  kStepLocks,  // the lock filter and its hand-over to init (lock_supervisor.h)
  kStepIdMaps, // a warm run's first process writing its own uid/gid maps
  kStepCount,
};

}  // namespace airlock::isolation::internal
