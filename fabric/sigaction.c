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
// signal context. libfabric links them (its psm and psm2 providers), so
// their constructors run when libfabric is loaded.
static const char *const weft_sig_grabbers[] = {
	"libinfinipath.", "libpsm_infinipath.", "libpsm2.", "libpsm3.", "libhfi1.", NULL,
};

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

static void *weft_sig_self_base(void) {
	Dl_info d;
	if (dladdr((void *)weft_sig_self_base, &d))
		return d.dli_fbase;
	return NULL;
}

// weft_sig_own reports whether fn lies in this program (the executable, or
// the shared object fabric is linked into): the Go runtime's handler, or
// one the program installed itself.
static int weft_sig_own(void *fn) {
	Dl_info d;
	void *self = weft_sig_self_base();
	return fn && self && dladdr(fn, &d) && d.dli_fbase == self;
}

// Guarded calls, and the load, are serialised so that one's saved state
// never holds another's change.
static pthread_mutex_t weft_sig_guard_mu = PTHREAD_MUTEX_INITIALIZER;

// The load: every disposition is saved before libfabric is opened and put
// back afterwards where the load changed it, unless the new handler lies
// in this program (another thread of the program installed it meanwhile,
// as signal.Notify does). SIGHUP, SIGINT, SIGQUIT and SIGTERM are blocked
// in the loading thread meanwhile, so that this thread, which holds the
// dynamic loader's lock during the load, never runs a library's handler;
// in a program with other threads that is all a mask can do (dl.go).
#define WEFT_SIG_ALL 65 /* signals 1..64 */
static struct sigaction weft_sig_load_saved[WEFT_SIG_ALL];
static unsigned char weft_sig_load_have[WEFT_SIG_ALL];
static unsigned char weft_sig_load_undone[WEFT_SIG_ALL];
static sigset_t weft_sig_load_mask;
static int weft_sig_load_masked;

static int weft_sig_same(const struct sigaction *a, const struct sigaction *b) {
	if (a->sa_handler != b->sa_handler || a->sa_flags != b->sa_flags)
		return 0;
	for (int s = 1; s < WEFT_SIG_ALL && s < NSIG; s++)
		if (sigismember(&a->sa_mask, s) != sigismember(&b->sa_mask, s))
			return 0;
	return 1;
}

void weft_sig_load_begin(void) {
	sigset_t block;
	pthread_mutex_lock(&weft_sig_guard_mu);
	for (int s = 1; s < WEFT_SIG_ALL && s < NSIG; s++) {
		memset(&weft_sig_load_saved[s], 0, sizeof(weft_sig_load_saved[s]));
		weft_sig_load_have[s] = s != SIGKILL && s != SIGSTOP &&
				sigaction(s, NULL, &weft_sig_load_saved[s]) == 0;
	}
	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGQUIT);
	sigaddset(&block, SIGTERM);
	weft_sig_load_masked = pthread_sigmask(SIG_BLOCK, &block, &weft_sig_load_mask) == 0;
}

void weft_sig_load_end(void) {
	for (int s = 1; s < WEFT_SIG_ALL && s < NSIG; s++) {
		struct sigaction cur;
		if (!weft_sig_load_have[s])
			continue;
		memset(&cur, 0, sizeof(cur));
		if (sigaction(s, NULL, &cur) != 0 || weft_sig_same(&cur, &weft_sig_load_saved[s]))
			continue;
		if (weft_sig_own(weft_sig_fn(&cur)))
			continue;
		if (sigaction(s, &weft_sig_load_saved[s], NULL) == 0)
			weft_sig_load_undone[s] = 1;
	}
	// A signal this thread kept pending is delivered here, under the
	// disposition just put back.
	if (weft_sig_load_masked)
		pthread_sigmask(SIG_SETMASK, &weft_sig_load_mask, NULL);
	pthread_mutex_unlock(&weft_sig_guard_mu);
}

int weft_sig_load_restored(int sig) {
	int r;
	if (sig <= 0 || sig >= WEFT_SIG_ALL)
		return 0;
	pthread_mutex_lock(&weft_sig_guard_mu);
	r = weft_sig_load_undone[sig];
	pthread_mutex_unlock(&weft_sig_guard_mu);
	return r;
}

// weft_sig_in_self reports whether sig's handler now lies in this program.
int weft_sig_in_self(int sig) {
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	if (sig <= 0 || sig >= NSIG || sigaction(sig, NULL, &sa) != 0)
		return 0;
	return weft_sig_own(weft_sig_fn(&sa));
}

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
// provider library loaded or initialised by the call).
#define WEFT_SIG_GUARD_MAX 32
static struct sigaction weft_sig_saved[WEFT_SIG_GUARD_MAX];
static uint64_t weft_sig_restored_mask;

void weft_sig_guard_begin(void) {
	pthread_mutex_lock(&weft_sig_guard_mu);
	for (int s = 1; s < WEFT_SIG_GUARD_MAX; s++)
		if (s != SIGKILL && s != SIGSTOP && sigaction(s, NULL, &weft_sig_saved[s]) != 0)
			weft_sig_saved[s].sa_handler = SIG_ERR;
}

void weft_sig_guard_end(void) {
	for (int s = 1; s < WEFT_SIG_GUARD_MAX; s++) {
		struct sigaction cur;
		void *fn;
		if (s == SIGKILL || s == SIGSTOP || weft_sig_saved[s].sa_handler == SIG_ERR || sigaction(s, NULL, &cur) != 0)
			continue;
		fn = weft_sig_fn(&cur);
		if (!fn || fn == weft_sig_fn(&weft_sig_saved[s]))
			continue;
		if (weft_sig_own(fn))
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
