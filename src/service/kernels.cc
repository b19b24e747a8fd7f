#include "service/kernels.h"

#include <algorithm>

#include "service/embedded_runner.h"

extern "C" const char airlock_kernel_javascript_begin[];
extern "C" const char airlock_kernel_javascript_end[];
extern "C" const char airlock_kernel_r_begin[];
extern "C" const char airlock_kernel_r_end[];
extern "C" const char airlock_kernel_java_begin[];
extern "C" const char airlock_kernel_java_end[];
extern "C" const char airlock_kernel_bash_begin[];
extern "C" const char airlock_kernel_bash_end[];

namespace airlock::service {
namespace {

constexpr int64_t kMiB = 1 << 20;

std::string_view Blob(const char* begin, const char* end) {
  return std::string_view(begin, static_cast<size_t>(end - begin));
}

// A Python context's main program: the runner's session, as a cold session
// runs it, from sources on fd 5 (a warm session's sandbox has no /sandbox
// files): the config JSON on the first line, then each module as its name, its
// size and its source, the runner last. The helpers are registered in
// sys.modules before the runner loads them; the control socket moves off fd 3
// (a cell's stray write to fd 3 must not reach the server), and the runner
// moves its result channel (fd 4) itself.
constexpr const char* kPythonBoot = R"py(import os, sys
with open("/proc/self/fd/5", "rb") as f:
    data = f.read()
os.close(5)
config, _, rest = data.partition(b"\n")
while rest:
    name, size, rest = rest.split(b"\n", 2)
    module = type(sys)(name.decode())
    module.__file__ = "/sandbox/" + module.__name__ + ".py"
    sys.modules[module.__name__] = module
    exec(compile(rest[:int(size)], module.__file__, "exec", dont_inherit=True), module.__dict__)
    rest = rest[int(size):]
del data, rest
runner = sys.modules["airlock_runner"]
runner.complete_site()
runner._load_helpers()
import fcntl, json
control = fcntl.fcntl(3, fcntl.F_DUPFD_CLOEXEC, 10)
os.close(3)
try:
    os.chdir(sys.argv[1])
except OSError as e:
    sys.stderr.write("airlock: the context's working directory %s: %s\n" % (sys.argv[1], e.strerror))
    os._exit(2)
os._exit(runner._Session(json.loads(config), control).serve())
)py";

}  // namespace

std::string_view KernelSource(profile::Language language) {
  switch (language) {
    case profile::Language::kJavaScript:
    case profile::Language::kTypeScript:
      return Blob(airlock_kernel_javascript_begin, airlock_kernel_javascript_end);
    case profile::Language::kR:
      return Blob(airlock_kernel_r_begin, airlock_kernel_r_end);
    case profile::Language::kJava:
      return Blob(airlock_kernel_java_begin, airlock_kernel_java_end);
    case profile::Language::kBash:
      return Blob(airlock_kernel_bash_begin, airlock_kernel_bash_end);
    case profile::Language::kPython:
      return EmbeddedRunner();
  }
  return {};
}

KernelLaunch KernelFor(profile::Language language, const std::string& cwd, const HostLanguages& host,
                       int64_t memory_bytes, const model::RunnerConfig& python_config) {
  KernelLaunch k;
  const int64_t memory_mib = std::max<int64_t>(memory_bytes / kMiB, 64);
  switch (language) {
    case profile::Language::kJavaScript:
    case profile::Language::kTypeScript: {
      k.argv = {"/usr/bin/node"};
      k.argv.insert(k.argv.end(), host.node_flags.begin(), host.node_flags.end());
      // The kernel's dynamic import() of a cell's modules; V8's heap within
      // the sandbox's memory (TypeScript's compiler is ~100 MB of it); two
      // V8 worker threads, not one per core (threads count in pids.max).
      k.argv.insert(k.argv.end(), {"--experimental-vm-modules",
                                   "--max-old-space-size=" + std::to_string(std::max<int64_t>(96, memory_mib / 3)),
                                   "--v8-pool-size=2", "-e", std::string(KernelSource(language)), "--",
                                   std::string(profile::LanguageName(language)), cwd});
      return k;
    }
    case profile::Language::kR:
      k.argv = {"/usr/bin/Rscript", "--vanilla", "/proc/self/fd/5", cwd};
      k.source = std::string(KernelSource(language));
      return k;
    case profile::Language::kJava: {
      // A JVM sizes itself from the host's memory, not the sandbox's: its heap
      // and reserved spaces are set here, under the address-space limit; one
      // compiler thread and the serial collector (threads count in pids.max);
      // no perf data file (it would be written to the shared /tmp).
      const int64_t heap = std::clamp<int64_t>(memory_mib / 4, 64, 1024);
      k.argv = {"/usr/bin/java",
                "-Xmx" + std::to_string(heap) + "m",
                "-XX:MaxMetaspaceSize=" + std::to_string(std::clamp<int64_t>(memory_mib / 4, 96, 256)) + "m",
                "-XX:CompressedClassSpaceSize=64m",
                "-XX:ReservedCodeCacheSize=32m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-XX:CICompilerCount=1",
                "-XX:-UsePerfData",
                "-Xshare:auto",
                "-Djava.io.tmpdir=/tmp",
                "--source",
                "11",
                "/proc/self/fd/5",
                cwd};
      k.source = std::string(KernelSource(language));
      return k;
    }
    case profile::Language::kBash:
      k.argv = {"/usr/bin/python3", "-I", "-S", "-B", "/proc/self/fd/5", cwd};
      k.source = std::string(KernelSource(language));
      return k;
    case profile::Language::kPython: {
      k.argv = {"/usr/bin/python3", "-I", "-B", "-S", "-X", "utf8", "-c", kPythonBoot, cwd};
      model::RunnerConfig config = python_config;
      config.code = "";
      config.code_path.clear();
      config.session = true;
      config.result_fd = 4;
      config.files.clear();
      config.preimport.clear();  // imported when the code asks (a zygote's job otherwise)
      k.source = model::RunnerConfigToJson(config) + "\n";
      auto add = [&k](std::string_view name, std::string_view source) {
        k.source.append(name).append("\n").append(std::to_string(source.size())).append("\n").append(source);
      };
      for (const exec::PythonModule& m : EmbeddedRunnerHelpers()) add(m.name, m.source);
      add("airlock_runner", EmbeddedRunner());
      return k;
    }
  }
  return k;
}

}  // namespace airlock::service
