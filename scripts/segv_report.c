/* segv_report.so: preloaded into a process (LD_PRELOAD), prints where a SIGSEGV, SIGBUS, SIGILL
 * or SIGFPE happened as library + offset for every frame (dladdr), so that a crash on a machine
 * without gdb names the library and, through addr2line or nm on that library, the function.
 * scripts/gpu_segv_probe.sh builds it with `cc -shared -fPIC -O1 -o segv_report.so` and runs the
 * GPU tests under it. The process still dies of the signal afterwards. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static char alt_stack[1 << 16];

static void put(const char* s) {
  ssize_t unused = write(2, s, strlen(s));
  (void)unused;
}

static void frame(int i, void* addr) {
  char line[768];
  Dl_info info;
  if (dladdr(addr, &info) && info.dli_fname != NULL) {
    const uintptr_t offset = (uintptr_t)addr - (uintptr_t)info.dli_fbase;
    if (info.dli_sname != NULL) {
      snprintf(line, sizeof line, "[segv-report] #%d %s+0x%lx (%s+0x%lx)\n", i, info.dli_fname,
               (unsigned long)offset, info.dli_sname,
               (unsigned long)((uintptr_t)addr - (uintptr_t)info.dli_saddr));
    } else {
      snprintf(line, sizeof line, "[segv-report] #%d %s+0x%lx\n", i, info.dli_fname,
               (unsigned long)offset);
    }
  } else {
    snprintf(line, sizeof line, "[segv-report] #%d %p (no object)\n", i, addr);
  }
  put(line);
}

static void report(int sig, siginfo_t* si, void* context) {
  char line[256];
  snprintf(line, sizeof line, "[segv-report] signal %d (%s) at address %p, pid %d\n", sig,
           strsignal(sig), si->si_addr, (int)getpid());
  put(line);
#if defined(__x86_64__)
  const ucontext_t* uc = (const ucontext_t*)context;
  frame(0, (void*)uc->uc_mcontext.gregs[REG_RIP]);
#else
  (void)context;
#endif
  void* frames[64];
  const int n = backtrace(frames, 64);
  for (int i = 0; i < n; ++i) frame(i + 1, frames[i]);
  put("[segv-report] end\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  void* warm[2];
  backtrace(warm, 2); /* loads libgcc_s now, not inside the handler */
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = report;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
  for (size_t i = 0; i < sizeof signals / sizeof signals[0]; ++i) sigaction(signals[i], &sa, NULL);
  put("[segv-report] installed\n");
}
