/* The native stack of a process that dies by a signal, without a debugger: LD_PRELOAD this
 * library and a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE) prints the faulting address, the
 * program counter and each frame as "library+offset (symbol)" on stderr, then dies as it would
 * have. bench/gpu_check.sh builds it where a load dies on a lent GPU (cuda-gdb may be slow to
 * start or absent) and names each frame's function with addr2line, which reads the libraries'
 * symbol tables (a Release build of llama.cpp keeps them).
 *
 * Python's faulthandler, when on, replaces this handler, prints the Python stack, then puts this
 * one back and raises the signal again: both stacks are printed.
 *
 *     cc -shared -fPIC -O1 -o segv_trace.so bench/segv_trace.c -ldl
 *     LD_PRELOAD=$PWD/segv_trace.so python3 ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static void say(const char *text, int n) {
    if (n > 0) {
        ssize_t ignored = write(STDERR_FILENO, text, (size_t) n);
        (void) ignored;
    }
}

static void frame(int i, void *pc) {
    char line[1024];
    Dl_info info;
    int n;
    if (dladdr(pc, &info) && info.dli_fname) {
        n = snprintf(line, sizeof line, "segv_trace: #%d %s+0x%lx (%s)\n", i, info.dli_fname,
                     (unsigned long) ((char *) pc - (char *) info.dli_fbase),
                     info.dli_sname ? info.dli_sname : "?");
    } else {
        n = snprintf(line, sizeof line, "segv_trace: #%d %p\n", i, pc);
    }
    say(line, n);
}

/* Frames printed at most: the innermost, where a fault is; a server keeps the last 40 lines of a
 * dying probe's stderr, faulthandler's Python stack (~10 lines) before these. */
#define FRAMES 24

static void on_fatal(int sig, siginfo_t *si, void *context) {
    ucontext_t *uc = (ucontext_t *) context;
    void *frames[FRAMES];
    char line[256];
#if defined(__x86_64__)
    void *pc = (void *) uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    void *pc = (void *) uc->uc_mcontext.pc;
#else
    void *pc = NULL;
#endif
    int n = snprintf(line, sizeof line, "segv_trace: signal %d (%s) at address %p\n", sig, strsignal(sig),
                     si->si_addr);
    say(line, n);
    frame(0, pc);  /* where it faulted: backtrace() below starts in this handler */
    n = backtrace(frames, FRAMES);
    for (int i = 0; i < n; i++) {
        frame(i + 1, frames[i]);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    static char stack[1 << 16];  /* a stack overflow still gets its frames printed */
    stack_t alt = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
    struct sigaction sa;
    const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    sigaltstack(&alt, NULL);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        sigaction(fatal[i], &sa, NULL);
    }
}
