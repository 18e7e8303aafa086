// Process signal dispositions around libfabric: see sigaction.go.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "shim.h"

// Libraries that install process-wide handlers for terminating and crash
// signals from their ELF constructors, whose handlers call exit() from
// signal context. libfabric links them directly (its psm and psm2
// providers), so they run before any code of this program.
static const char *const weft_sig_grabbers[] = {
	"libinfinipath.", "libpsm_infinipath.", "libpsm2.", "libpsm3.", "libhfi1.", NULL,
};

static uint64_t weft_sig_reset_mask;

// Filled by weft_sig_preinit (sigpreinit.c), which runs before any
// library's constructor: the dispositions the process started with, and
// its signal mask before the terminating signals were blocked.
int weft_sig_pre_taken;
struct sigaction weft_sig_pre[64];
sigset_t weft_sig_pre_mask;

static void *weft_sig_fn(const struct sigaction *sa) {
	if (sa->sa_flags & SA_SIGINFO)
		return (void *)sa->sa_sigaction;
	if (sa->sa_handler == SIG_DFL || sa->sa_handler == SIG_IGN)
		return NULL;
	return (void *)sa->sa_handler;
}

// weft_sig_grabbed reports whether fn lies in one of weft_sig_grabbers.
static int weft_sig_grabbed(void *fn) {
	Dl_info d;
	const char *base;
	if (!fn || !dladdr(fn, &d) || !d.dli_fname)
		return 0;
	base = strrchr(d.dli_fname, '/');
	base = base ? base + 1 : d.dli_fname;
	for (int i = 0; weft_sig_grabbers[i]; i++)
		if (strncmp(base, weft_sig_grabbers[i], strlen(weft_sig_grabbers[i])) == 0)
			return 1;
	return 0;
}

// weft_sig_reset runs after the libraries' constructors and before the Go
// runtime installs its signal handlers (the program's own ELF constructors
// run in between), so the runtime records the disposition the process
// started with, not the library's handler, as the one to forward to. A
// terminating signal that arrived during the libraries' constructors was
// kept pending by weft_sig_preinit and is delivered here, under that
// disposition.
__attribute__((constructor)) static void weft_sig_reset(void) {
	for (int s = 1; s < 64 && s < NSIG; s++) {
		struct sigaction sa;
		if (s == SIGKILL || s == SIGSTOP || sigaction(s, NULL, &sa) != 0)
			continue;
		if (!weft_sig_grabbed(weft_sig_fn(&sa)))
			continue;
		if (weft_sig_pre_taken && !weft_sig_grabbed(weft_sig_fn(&weft_sig_pre[s]))) {
			sa = weft_sig_pre[s];
		} else {
			memset(&sa, 0, sizeof(sa));
			sa.sa_handler = SIG_DFL;
			sigemptyset(&sa.sa_mask);
		}
		if (sigaction(s, &sa, NULL) == 0)
			weft_sig_reset_mask |= 1ULL << s;
	}
	if (weft_sig_pre_taken)
		pthread_sigmask(SIG_SETMASK, &weft_sig_pre_mask, NULL);
}

uint64_t weft_sig_reset_at_start(void) { return weft_sig_reset_mask; }

uint64_t weft_sig_grabbed_now(void) {
	uint64_t m = 0;
	for (int s = 1; s < 64 && s < NSIG; s++) {
		struct sigaction sa;
		if (s == SIGKILL || s == SIGSTOP || sigaction(s, NULL, &sa) != 0)
			continue;
		if (weft_sig_grabbed(weft_sig_fn(&sa)))
			m |= 1ULL << s;
	}
	return m;
}

// The guard: the dispositions of the classic signals are saved before a
// libfabric call that may load or initialise providers and restored after
// it where the call installed a handler from outside this program (a
// provider library loaded or initialised by the call). Guarded calls are
// serialised so that one call's saved state never holds another's change.
#define WEFT_SIG_GUARD_MAX 32
static pthread_mutex_t weft_sig_guard_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction weft_sig_saved[WEFT_SIG_GUARD_MAX];
static uint64_t weft_sig_restored_mask;

static void *weft_sig_self_base(void) {
	Dl_info d;
	if (dladdr((void *)weft_sig_self_base, &d))
		return d.dli_fbase;
	return NULL;
}

void weft_sig_guard_begin(void) {
	pthread_mutex_lock(&weft_sig_guard_mu);
	for (int s = 1; s < WEFT_SIG_GUARD_MAX; s++)
		if (s != SIGKILL && s != SIGSTOP && sigaction(s, NULL, &weft_sig_saved[s]) != 0)
			weft_sig_saved[s].sa_handler = SIG_ERR;
}

void weft_sig_guard_end(void) {
	void *self = NULL;
	for (int s = 1; s < WEFT_SIG_GUARD_MAX; s++) {
		struct sigaction cur;
		void *fn;
		Dl_info d;
		if (s == SIGKILL || s == SIGSTOP || weft_sig_saved[s].sa_handler == SIG_ERR || sigaction(s, NULL, &cur) != 0)
			continue;
		fn = weft_sig_fn(&cur);
		if (!fn || fn == weft_sig_fn(&weft_sig_saved[s]))
			continue;
		if (!self)
			self = weft_sig_self_base();
		if (dladdr(fn, &d) && d.dli_fbase == self)
			continue; // this program's own (the Go runtime's) handler
		if (sigaction(s, &weft_sig_saved[s], NULL) == 0)
			weft_sig_restored_mask |= 1ULL << s;
	}
	pthread_mutex_unlock(&weft_sig_guard_mu);
}

uint64_t weft_sig_restored(void) {
	uint64_t m;
	pthread_mutex_lock(&weft_sig_guard_mu);
	m = weft_sig_restored_mask;
	pthread_mutex_unlock(&weft_sig_guard_mu);
	return m;
}

// weft_sig_guard_selftest installs, inside the guard, a handler for sig
// that lives outside this program (a libc function; sig must not be raised
// meanwhile), as a provider library would, and reports whether the guard
// put the previous disposition back: 1 yes, 0 no, -1 setup failed.
int weft_sig_guard_selftest(int sig) {
	struct sigaction before, foreign, after;
	int ok;
	if (sig <= 0 || sig >= WEFT_SIG_GUARD_MAX || sigaction(sig, NULL, &before) != 0)
		return -1;
	memset(&foreign, 0, sizeof(foreign));
	foreign.sa_handler = (void (*)(int))(void *)abort;
	sigemptyset(&foreign.sa_mask);
	weft_sig_guard_begin();
	if (sigaction(sig, &foreign, NULL) != 0) {
		weft_sig_guard_end();
		return -1;
	}
	weft_sig_guard_end();
	if (sigaction(sig, NULL, &after) != 0)
		return -1;
	ok = weft_sig_fn(&after) == weft_sig_fn(&before) && after.sa_flags == before.sa_flags;
	if (!ok)
		sigaction(sig, &before, NULL);
	return ok;
}
