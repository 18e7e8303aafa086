// Loading libfabric at run time: see dl.go.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shim.h"

// The symbol versions below are the ones a program built with libfabric
// 1.17's headers and linked with -lfabric binds to (nm -D of such a
// program): later libfabric releases add versions of fi_getinfo,
// fi_dupinfo and fi_freeinfo for a changed struct fi_info, and a plain
// dlsym would return the newest one, whose structures these headers do not
// describe. Other headers may bind other versions: check before changing.
#if FI_MAJOR_VERSION != 1 || FI_MINOR_VERSION != 17
#error "fabric/dl.c names the symbol versions that libfabric 1.17's headers bind to: check them (nm -D --undefined-only of a program linked with -lfabric) for these headers"
#endif

struct weft_fi_fns weft_fi;

static int weft_dl_ready;
static uint64_t weft_dl_count;
static char weft_dl_msg[512];

// weft_dl_sym is dlvsym(h, sym, version), recording in weft_dl_msg why not.
static void *weft_dl_sym(void *h, const char *name, const char *sym, const char *version) {
	void *p = dlvsym(h, sym, version);
	if (!p)
		snprintf(weft_dl_msg, sizeof(weft_dl_msg), "%s has no %s@%s", name, sym, version);
	return p;
}

// weft_dl_load opens name (RTLD_NOW | RTLD_LOCAL) and resolves the
// functions of weft_fi. The caller makes sure it runs once (dl.go). The
// libraries' constructors run inside it, between weft_sig_load_begin and
// weft_sig_load_end (sigaction.c). With quiet_ipath, IPATH_NO_BACKTRACE is
// set in the C environment for the duration of the load unless it is set
// already: libinfinipath's constructor then installs no signal handlers.
// Returns 0, or -1 with the reason in weft_dl_error().
int weft_dl_load(const char *name, int quiet_ipath) {
	struct weft_fi_fns fns;
	void *h;
	int set_env = 0;
	__atomic_add_fetch(&weft_dl_count, 1, __ATOMIC_RELAXED);
	if (quiet_ipath && getenv("IPATH_NO_BACKTRACE") == NULL)
		set_env = setenv("IPATH_NO_BACKTRACE", "1", 0) == 0;
	weft_sig_load_begin();
	h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	weft_sig_load_end();
	if (set_env)
		unsetenv("IPATH_NO_BACKTRACE");
	if (!h) {
		const char *e = dlerror();
		snprintf(weft_dl_msg, sizeof(weft_dl_msg), "%s", e ? e : name);
		return -1;
	}
	// On a missing symbol the library stays loaded: unloading it would run
	// its destructors and leave its constructors' effects.
	if (!(fns.getinfo = (__typeof__(fns.getinfo))weft_dl_sym(h, name, "fi_getinfo", "FABRIC_1.3")) ||
			!(fns.freeinfo = (__typeof__(fns.freeinfo))weft_dl_sym(h, name, "fi_freeinfo", "FABRIC_1.3")) ||
			!(fns.dupinfo = (__typeof__(fns.dupinfo))weft_dl_sym(h, name, "fi_dupinfo", "FABRIC_1.3")) ||
			!(fns.fabric = (__typeof__(fns.fabric))weft_dl_sym(h, name, "fi_fabric", "FABRIC_1.1")) ||
			!(fns.strerror = (__typeof__(fns.strerror))weft_dl_sym(h, name, "fi_strerror", "FABRIC_1.0")))
		return -1;
	weft_fi = fns;
	__atomic_store_n(&weft_dl_ready, 1, __ATOMIC_RELEASE);
	return 0;
}

const char *weft_dl_error(void) { return weft_dl_msg; }

int weft_dl_loaded(void) { return __atomic_load_n(&weft_dl_ready, __ATOMIC_ACQUIRE); }

uint64_t weft_dl_loads(void) { return __atomic_load_n(&weft_dl_count, __ATOMIC_RELAXED); }

// weft_strerror is fi_strerror once libfabric is loaded. Before, it is
// what fi_strerror does for a plain errno (libc's strerror), so that
// messages for such codes need no load.
const char *weft_strerror(int err) {
	if (err < 0)
		err = -err;
	if (weft_dl_loaded())
		return weft_fi.strerror(err);
	if (err < FI_ERRNO_OFFSET)
		return strerror(err);
	return "libfabric error (libfabric is not loaded)";
}
