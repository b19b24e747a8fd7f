/* try_syscall NAME...: performs each named system call with harmless or invalid
 * arguments and prints one line per name:
 *
 *   NAME ok
 *   NAME errno=<n> (<strerror>)
 *
 * then exits 0 (2 for an unknown name). Like bubblewrap's tests/try-syscall.c: run
 * it inside a sandbox and every refused call answers EPERM (clone3: ENOSYS), or the
 * process is killed (x32_getpid, i386_getpid: SIGSYS; give those alone).
 *
 * Every call is chosen to be harmless WITHOUT any sandbox too, even as root: invalid
 * magic numbers, flags or descriptors, paths under /nonexistent-airlock, nothing
 * that stops, reboots, mounts or attaches to anything it did not create itself.
 *
 * Environment: TARGET_PID, for `ptrace`: the process to PTRACE_ATTACH to (detached
 * again at once if that works). Unset: a child this program forks for the purpose
 * (never pid 1: as root outside a sandbox, attaching to init would stop it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#define X32_SYSCALL_BIT 0x40000000L

/* Each returns the raw result: -1 with errno set means failure. */
typedef long (*try_fn)(void);

static long close_if_fd(long fd) {
  if (fd >= 0) close((int)fd);
  return fd;
}

static long wait_child(long pid) {
  if (pid == 0) _exit(0); /* the child of a successful clone */
  if (pid > 0) {
    int saved = errno;
    waitpid((pid_t)pid, NULL, __WALL);
    errno = saved;
  }
  return pid;
}

static long try_ptrace(void) {
  const char* env = getenv("TARGET_PID");
  pid_t target;
  pid_t own = -1;
  if (env && *env) {
    target = (pid_t)atoi(env);
  } else {
    own = fork();
    if (own < 0) return -1;
    if (own == 0) {
      for (;;) pause();
    }
    target = own;
  }
  long rc = syscall(SYS_ptrace, PTRACE_ATTACH, target, NULL, NULL);
  int saved = errno;
  if (rc == 0) {
    waitpid(target, NULL, __WALL); /* the attach stop */
    syscall(SYS_ptrace, PTRACE_DETACH, target, NULL, NULL);
  }
  if (own > 0) {
    kill(own, SIGKILL);
    waitpid(own, NULL, 0);
  }
  errno = saved;
  return rc;
}

static long try_mount(void) {
  return syscall(SYS_mount, "/nonexistent-airlock/src", "/nonexistent-airlock/dst", "tmpfs", 0UL, NULL);
}
static long try_umount2(void) { return syscall(SYS_umount2, "/nonexistent-airlock", 0); }
static long try_pivot_root(void) {
  return syscall(SYS_pivot_root, "/nonexistent-airlock/new", "/nonexistent-airlock/old");
}
static long try_chroot(void) { return syscall(SYS_chroot, "/nonexistent-airlock"); }
/* Affects only this short-lived process. */
static long try_unshare(void) { return syscall(SYS_unshare, CLONE_NEWUSER); }
static long try_setns(void) { return syscall(SYS_setns, -1, 0); }
static long try_keyctl(void) { return syscall(SYS_keyctl, 0x7fffffff, 0, 0, 0, 0); } /* no such op */
static long try_add_key(void) {
  /* A payload over the 1 MiB limit is refused before anything is looked up. */
  return syscall(SYS_add_key, "user", "airlock-try", NULL, (size_t)1 << 30, -2 /* process ring */);
}
static long try_request_key(void) { return syscall(SYS_request_key, "user", NULL, NULL, 0); }
static long try_bpf(void) { return syscall(SYS_bpf, 0xffff, NULL, 0); } /* no such command */
static long try_perf_event_open(void) { return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0); }
static long try_userfaultfd(void) { return close_if_fd(syscall(SYS_userfaultfd, 0xffffffff)); }
static long try_io_uring_setup(void) { return close_if_fd(syscall(SYS_io_uring_setup, 0, NULL)); }
static long try_kexec_load(void) {
  /* 17 segments (> KEXEC_SEGMENT_MAX) and unknown flags: EINVAL, nothing loaded or unloaded. */
  return syscall(SYS_kexec_load, 0UL, 17UL, NULL, 0xffff0000UL);
}
static long try_kexec_file_load(void) { return syscall(SYS_kexec_file_load, -1, -1, 0UL, NULL, 0xffffffffUL); }
/* Shorter than an ELF header: ENOEXEC. */
static long try_init_module(void) { return syscall(SYS_init_module, "", 0UL, ""); }
static long try_finit_module(void) { return syscall(SYS_finit_module, -1, "", 0); }
static long try_delete_module(void) { return syscall(SYS_delete_module, "airlock_nonexistent_module", O_NONBLOCK); }
static long try_open_by_handle_at(void) { return close_if_fd(syscall(SYS_open_by_handle_at, -1, NULL, 0)); }
static long try_name_to_handle_at(void) {
  return syscall(SYS_name_to_handle_at, AT_FDCWD, "/nonexistent-airlock", NULL, NULL, 0);
}
static long try_reboot(void) { return syscall(SYS_reboot, 0, 0, 0, NULL); } /* wrong magic: EINVAL */
static long try_swapon(void) { return syscall(SYS_swapon, "/nonexistent-airlock", 0); }
static long try_swapoff(void) { return syscall(SYS_swapoff, "/nonexistent-airlock"); }
static long try_syslog(void) { return syscall(SYS_syslog, 10 /* SIZE_BUFFER: a query */, NULL, 0); }
static long try_acct(void) { return syscall(SYS_acct, "/nonexistent-airlock"); }
static long try_clone_newuser(void) {
  return wait_child(syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL, 0UL));
}
static long try_clone_newns(void) {
  return wait_child(syscall(SYS_clone, (unsigned long)(CLONE_NEWNS | SIGCHLD), NULL, NULL, NULL, 0UL));
}
static long try_clone_newnet(void) {
  return wait_child(syscall(SYS_clone, (unsigned long)(CLONE_NEWNET | SIGCHLD), NULL, NULL, NULL, 0UL));
}
static long try_fork(void) {
  return wait_child(syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, 0UL));
}
static long try_clone3(void) {
  struct clone_args args;
  memset(&args, 0, sizeof(args));
  args.flags = CLONE_NEWUSER; /* the point: seccomp cannot see these flags */
  args.exit_signal = SIGCHLD;
  return wait_child(syscall(SYS_clone3, &args, sizeof(args)));
}
static long try_socket(int domain, int type, int protocol) {
  return close_if_fd(syscall(SYS_socket, domain, type, protocol));
}
static long try_socket_inet(void) { return try_socket(AF_INET, SOCK_STREAM, 0); }
static long try_socket_inet6(void) { return try_socket(AF_INET6, SOCK_STREAM, 0); }
static long try_socket_udp(void) { return try_socket(AF_INET, SOCK_DGRAM, 0); }
static long try_socket_netlink(void) { return try_socket(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */); }
static long try_socket_packet(void) { return try_socket(AF_PACKET, SOCK_RAW, 0); }
static long try_socket_alg(void) { return try_socket(AF_ALG, SOCK_SEQPACKET, 0); }
static long try_socket_vsock(void) { return try_socket(AF_VSOCK, SOCK_STREAM, 0); }
static long try_socket_unix(void) { return try_socket(AF_UNIX, SOCK_STREAM, 0); }
/* AF_INET with a high bit the kernel ignores (int argument): must not pass an AF_UNIX-only filter. */
static long try_socket_inet_hi(void) {
  return close_if_fd(syscall(SYS_socket, (1UL << 32) | AF_INET, SOCK_STREAM, 0));
}
static long try_socketpair_inet(void) {
  int sv[2];
  long rc = syscall(SYS_socketpair, AF_INET, SOCK_STREAM, 0, sv);
  if (rc == 0) {
    close(sv[0]);
    close(sv[1]);
  }
  return rc;
}
static long try_getpid(void) { return syscall(SYS_getpid); }
static long try_x32_getpid(void) { return syscall(X32_SYSCALL_BIT | 39); }
static long try_i386_getpid(void) {
  long ret;
  /* int $0x80 enters the i386 ABI; 20 is its getpid. */
  __asm__ volatile("int $0x80" : "=a"(ret) : "0"(20L) : "memory", "r8", "r9", "r10", "r11");
  if (ret < 0 && ret > -4096) {
    errno = (int)-ret;
    return -1;
  }
  return ret;
}
static long try_splice(void) { return syscall(SYS_splice, -1, NULL, -1, NULL, 1UL, 0U); }
static long try_vmsplice(void) { return syscall(SYS_vmsplice, -1, NULL, 0UL, 0U); }
static long try_tee(void) { return syscall(SYS_tee, -1, -1, 1UL, 0U); }
static long try_process_vm_readv(void) {
  /* Reads this process's own memory. */
  char src[8] = "airlock", dst[8];
  struct iovec local = {dst, sizeof(dst)}, remote = {src, sizeof(src)};
  return syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL, 0UL);
}
static long try_setuid(void) { return syscall(SYS_setuid, 0); } /* as root: no change */
static long try_personality(void) {
  long old = syscall(SYS_personality, 0xffffffffUL);
  long rc = syscall(SYS_personality, (unsigned long)PER_LINUX32);
  if (rc != -1 && old != -1) {
    int saved = errno;
    syscall(SYS_personality, (unsigned long)old);
    errno = saved;
  }
  return rc;
}
static long try_iopl(void) { return syscall(SYS_iopl, 4); }                /* level > 3: EINVAL */
static long try_ioperm(void) { return syscall(SYS_ioperm, 0x10000UL, 1UL, 0); } /* past the bitmap */
static long try_modify_ldt(void) {
  char buf[16];
  return syscall(SYS_modify_ldt, 0 /* read */, buf, sizeof(buf));
}
static long try_fanotify_init(void) { return close_if_fd(syscall(SYS_fanotify_init, 0xffffffffU, 0U)); }
static long try_mknod(void) {
  /* A /dev/null node (1,3) in a fresh temporary directory, removed again. */
  char dir[] = "/tmp/airlock-try-mknod-XXXXXX";
  if (!mkdtemp(dir)) return -1;
  char path[sizeof(dir) + 8];
  snprintf(path, sizeof(path), "%s/node", dir);
  long rc = syscall(SYS_mknodat, AT_FDCWD, path, S_IFCHR | 0600, makedev(1, 3));
  int saved = errno;
  unlink(path);
  rmdir(dir);
  errno = saved;
  return rc;
}
static long try_mkfifo(void) {
  char dir[] = "/tmp/airlock-try-fifo-XXXXXX";
  if (!mkdtemp(dir)) return -1;
  char path[sizeof(dir) + 8];
  snprintf(path, sizeof(path), "%s/fifo", dir);
  long rc = syscall(SYS_mknodat, AT_FDCWD, path, S_IFIFO | 0600, 0);
  int saved = errno;
  unlink(path);
  rmdir(dir);
  errno = saved;
  return rc;
}
/* PID 1 ignores SIGKILL from its own namespace (and from the host's init's), so
 * this only tells whether the signal may be sent at all. */
static long try_kill_1(void) { return syscall(SYS_kill, 1, SIGKILL); }
/* fd -1: outside a sandbox EBADF, never a byte pushed into anyone's terminal. */
static long try_tiocsti(void) { return syscall(SYS_ioctl, -1, (unsigned long)TIOCSTI, "x"); }
/* The same request with a high bit the kernel drops (cmd is an unsigned int). */
static long try_tiocsti_hi(void) { return syscall(SYS_ioctl, -1, (1UL << 32) | TIOCSTI, "x"); }
static long try_tioclinux(void) {
  char sub = 0;
  return syscall(SYS_ioctl, -1, (unsigned long)TIOCLINUX, &sub);
}
static long try_pidfd_getfd(void) { return syscall(SYS_pidfd_getfd, -1, 0, 0); }
static long try_sethostname(void) { return syscall(SYS_sethostname, "x", (size_t)-1); } /* bad length */
static long try_settimeofday(void) { return syscall(SYS_settimeofday, NULL, NULL); }   /* no-op */

struct entry {
  const char* name;
  try_fn fn;
};

static const struct entry kEntries[] = {
    {"ptrace", try_ptrace},
    {"mount", try_mount},
    {"umount2", try_umount2},
    {"pivot_root", try_pivot_root},
    {"chroot", try_chroot},
    {"unshare", try_unshare},
    {"setns", try_setns},
    {"keyctl", try_keyctl},
    {"add_key", try_add_key},
    {"request_key", try_request_key},
    {"bpf", try_bpf},
    {"perf_event_open", try_perf_event_open},
    {"userfaultfd", try_userfaultfd},
    {"io_uring_setup", try_io_uring_setup},
    {"kexec_load", try_kexec_load},
    {"kexec_file_load", try_kexec_file_load},
    {"init_module", try_init_module},
    {"finit_module", try_finit_module},
    {"delete_module", try_delete_module},
    {"open_by_handle_at", try_open_by_handle_at},
    {"name_to_handle_at", try_name_to_handle_at},
    {"reboot", try_reboot},
    {"swapon", try_swapon},
    {"swapoff", try_swapoff},
    {"syslog", try_syslog},
    {"acct", try_acct},
    {"clone_newuser", try_clone_newuser},
    {"clone_newns", try_clone_newns},
    {"clone_newnet", try_clone_newnet},
    {"fork", try_fork},
    {"clone3", try_clone3},
    {"socket_inet", try_socket_inet},
    {"socket_inet6", try_socket_inet6},
    {"socket_udp", try_socket_udp},
    {"socket_inet_hi", try_socket_inet_hi},
    {"socket_netlink", try_socket_netlink},
    {"socket_packet", try_socket_packet},
    {"socket_alg", try_socket_alg},
    {"socket_vsock", try_socket_vsock},
    {"socket_unix", try_socket_unix},
    {"socketpair_inet", try_socketpair_inet},
    {"getpid", try_getpid},
    {"x32_getpid", try_x32_getpid},
    {"i386_getpid", try_i386_getpid},
    {"splice", try_splice},
    {"vmsplice", try_vmsplice},
    {"tee", try_tee},
    {"process_vm_readv", try_process_vm_readv},
    {"setuid", try_setuid},
    {"personality", try_personality},
    {"iopl", try_iopl},
    {"ioperm", try_ioperm},
    {"modify_ldt", try_modify_ldt},
    {"fanotify_init", try_fanotify_init},
    {"mknod", try_mknod},
    {"mkfifo", try_mkfifo},
    {"kill_1", try_kill_1},
    {"tiocsti", try_tiocsti},
    {"tiocsti_hi", try_tiocsti_hi},
    {"tioclinux", try_tioclinux},
    {"pidfd_getfd", try_pidfd_getfd},
    {"sethostname", try_sethostname},
    {"settimeofday", try_settimeofday},
};

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s NAME...\nnames:", argv[0]);
    for (size_t i = 0; i < sizeof(kEntries) / sizeof(kEntries[0]); ++i) fprintf(stderr, " %s", kEntries[i].name);
    fprintf(stderr, "\n");
    return 2;
  }
  int status = 0;
  for (int a = 1; a < argc; ++a) {
    const struct entry* e = NULL;
    for (size_t i = 0; i < sizeof(kEntries) / sizeof(kEntries[0]); ++i) {
      if (strcmp(kEntries[i].name, argv[a]) == 0) e = &kEntries[i];
    }
    if (!e) {
      printf("%s unknown\n", argv[a]);
      fflush(stdout);
      status = 2;
      continue;
    }
    errno = 0;
    long rc = e->fn();
    if (rc == -1) {
      int err = errno;
      printf("%s errno=%d (%s)\n", e->name, err, strerror(err));
    } else {
      printf("%s ok\n", e->name);
    }
    /* Line by line, so what ran before a fatal call (x32, i386) is not lost. */
    fflush(stdout);
  }
  return status;
}
